//! A tool's input schema, derived from its input type so that the schema the model sees and
//! the struct the input is parsed into cannot drift.

use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::{JsonSchema, Schema};
use serde_json::json;

/// The JSON Schema text of `T`, as [`Declaration::new`](crate::Declaration::new) takes it.
///
/// Derive `T` with `#[derive(Deserialize, JsonSchema)]` and `#[serde(deny_unknown_fields)]`,
/// which becomes `"additionalProperties": false`. A field's doc comment becomes its
/// `description`; a field with `#[serde(default)]` is optional and shows its default;
/// `#[schemars(length(min = 1))]` gives `minLength` or `minItems`. An `Option` field is
/// optional, but schemars also offers it `null`: `#[schemars(extend("type" = "string"))]` keeps
/// the schema to the inner type, so a model leaves the field out instead. Types used inside `T` are
/// inlined, so their own doc comments reach the model too (as the description of, say, an
/// array's items); `T`'s own name and doc comment do not: the declaration's description says
/// what the tool is.
pub fn input_schema<T: JsonSchema>() -> String {
    let mut schema = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = true;
        })
        .into_generator()
        .into_root_schema_for::<T>();
    schema.remove("title");
    schema.remove("description");
    // Even a tool that takes nothing declares both: some model APIs reject an object schema
    // without `properties`.
    let root = schema.ensure_object();
    root.entry("properties").or_insert_with(|| json!({}));
    root.entry("required").or_insert_with(|| json!([]));
    RecursiveTransform(drop_integer_format).transform(&mut schema);
    schema.to_value().to_string()
}

/// Drops the `format` (`uint64`, `int32`…) schemars gives an integer: its width is no use to
/// the model, and an unsigned type already shows as `"minimum": 0`.
fn drop_integer_format(schema: &mut Schema) {
    if schema.get("type").and_then(|kind| kind.as_str()) == Some("integer") {
        schema.remove("format");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::Value;

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "only the schema of these types is used")]
    /// The input's own doc comment, not shown.
    struct Input {
        /// A count.
        #[serde(default)]
        count: u64,
        /// Items, at least one.
        #[schemars(length(min = 1))]
        items: Vec<Item>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "only the schema of these types is used")]
    struct Item {
        /// A name.
        name: String,
    }

    #[test]
    fn a_closed_object_inlined_without_generator_noise() {
        let schema: Value = serde_json::from_str(&input_schema::<Input>()).unwrap();
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "count": {
                        "type": "integer",
                        "minimum": 0,
                        "default": 0,
                        "description": "A count."
                    },
                    "items": {
                        "type": "array",
                        "minItems": 1,
                        "description": "Items, at least one.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string", "description": "A name."}
                            },
                            "required": ["name"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["items"],
                "additionalProperties": false
            })
        );
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Nothing {}

    #[test]
    fn an_input_of_nothing_still_lists_properties_and_required() {
        let schema: Value = serde_json::from_str(&input_schema::<Nothing>()).unwrap();
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {},
                "required": [],
                "additionalProperties": false
            })
        );
    }
}
