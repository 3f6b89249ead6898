//! Validating tool inputs against the tool's declared JSON Schema.
//!
//! Validation happens in the host, before a plugin runs, so a plugin never sees an input of the
//! wrong shape and the model gets the same precise message from every tool.

use serde_json::Value;

/// Why a tool's input schema cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("not valid JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("a tool's input schema must have \"type\": \"object\"")]
    NotObject,
    #[error("{0}")]
    Invalid(#[source] jsonschema::ValidationError<'static>),
}

/// One way an input does not fit its schema: the field it is about (none: the whole input,
/// such as a missing required field) and what is wrong.
#[derive(Clone, Debug)]
pub struct Problem {
    /// The field as a model writes it, such as `edits[0].old`.
    pub field: Option<String>,
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

/// A compiled input schema.
pub struct InputSchema {
    schema: Value,
    validator: jsonschema::Validator,
}

impl InputSchema {
    /// Compiles the schema `text`; the error says why it is not a usable schema.
    pub fn compile(text: &str) -> Result<Self, SchemaError> {
        let schema: Value = serde_json::from_str(text).map_err(SchemaError::NotJson)?;
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(SchemaError::NotObject);
        }
        let validator = jsonschema::validator_for(&schema).map_err(SchemaError::Invalid)?;
        Ok(InputSchema { schema, validator })
    }

    /// The schema as JSON.
    pub fn json(&self) -> &Value {
        &self.schema
    }

    /// Checks `input`; the error lists every problem, each naming the field it is about.
    pub fn check(&self, input: &Value) -> Result<(), Vec<Problem>> {
        let problems: Vec<Problem> = self
            .validator
            .iter_errors(input)
            .map(|error| {
                let path = error.instance_path().to_string();
                Problem {
                    field: (!path.is_empty()).then(|| field_name(&path)),
                    reason: error.to_string(),
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
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
        let text = |input| {
            let problems = s.check(&input).unwrap_err();
            problems
                .iter()
                .map(Problem::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        };
        let missing = text(json!({}));
        assert!(missing.contains("\"path\""), "{missing}");
        let wrong = text(json!({"path": "a", "start": "x"}));
        assert!(wrong.starts_with("start: "), "{wrong}");
        let unknown = text(json!({"path": "a", "bogus": 1}));
        assert!(unknown.contains("bogus"), "{unknown}");
        let nested = text(json!({"path": "a", "edits": [{"old": 1}]}));
        assert!(nested.starts_with("edits[0].old: "), "{nested}");
    }

    #[test]
    fn a_schema_must_describe_an_object() {
        assert!(InputSchema::compile(r#"{"type": "string"}"#).is_err());
        assert!(InputSchema::compile("{").is_err());
    }
}
