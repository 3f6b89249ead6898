//! Validating tool inputs against the tool's declared JSON Schema.
//!
//! Validation happens in the host, before a plugin runs, so a plugin never sees an input of the
//! wrong shape and the model gets the same precise message from every tool.

use serde_json::Value;

/// A compiled input schema.
pub struct InputSchema {
    schema: Value,
    validator: jsonschema::Validator,
}

impl InputSchema {
    /// Compiles the schema `text`; the error says why it is not a usable schema.
    pub fn compile(text: &str) -> Result<Self, String> {
        let schema: Value =
            serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err("a tool's input schema must have \"type\": \"object\"".into());
        }
        let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
        Ok(InputSchema { schema, validator })
    }

    /// The schema as JSON.
    pub fn json(&self) -> &Value {
        &self.schema
    }

    /// Checks `input`; the error lists every problem, each naming the field it is about.
    pub fn check(&self, input: &Value) -> Result<(), String> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(input)
            .map(|error| {
                let path = error.instance_path().to_string();
                if path.is_empty() {
                    error.to_string()
                } else {
                    format!("{}: {error}", field_name(&path))
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// `/edits/0/old` as `edits[0].old`, the way a model writes a field.
fn field_name(pointer: &str) -> String {
    let mut name = String::new();
    for part in pointer.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        if part.parse::<usize>().is_ok() {
            name.push_str(&format!("[{part}]"));
        } else {
            if !name.is_empty() {
                name.push('.');
            }
            name.push_str(&part);
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> InputSchema {
        InputSchema::compile(
            &json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "start": {"type": "integer", "minimum": 0},
                    "edits": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"old": {"type": "string"}},
                        "required": ["old"],
                        "additionalProperties": false
                    }}
                },
                "required": ["path"],
                "additionalProperties": false
            })
            .to_string(),
        )
        .unwrap()
    }

    #[test]
    fn errors_name_the_field() {
        let s = schema();
        assert!(s.check(&json!({"path": "a"})).is_ok());
        let missing = s.check(&json!({})).unwrap_err();
        assert!(missing.contains("\"path\""), "{missing}");
        let wrong = s.check(&json!({"path": "a", "start": "x"})).unwrap_err();
        assert!(wrong.starts_with("start: "), "{wrong}");
        let unknown = s.check(&json!({"path": "a", "bogus": 1})).unwrap_err();
        assert!(unknown.contains("bogus"), "{unknown}");
        let nested = s
            .check(&json!({"path": "a", "edits": [{"old": 1}]}))
            .unwrap_err();
        assert!(nested.starts_with("edits[0].old: "), "{nested}");
    }

    #[test]
    fn a_schema_must_describe_an_object() {
        assert!(InputSchema::compile(r#"{"type": "string"}"#).is_err());
        assert!(InputSchema::compile("{").is_err());
    }
}
