//! The loop detector: notices a model repeating a call that cannot give it anything new.

use serde_json::Value;

/// How many identical calls in a row trigger the warning.
pub const THRESHOLD: u32 = 3;

/// Remembers the last call and how many times in a row it was made with the same result.
#[derive(Default)]
pub struct LoopDetector {
    last: Option<(String, Value, String)>,
    repeats: u32,
}

impl LoopDetector {
    /// Records a call of `tool` with `input` that produced `output`; returns the warning to
    /// append when this is the third (or later) identical call in a row. Inputs are compared
    /// as JSON values, so the order of keys does not matter.
    pub fn observe(&mut self, tool: &str, input: &Value, output: &str) -> Option<String> {
        let same = self
            .last
            .as_ref()
            .is_some_and(|(t, i, o)| t == tool && i == input && o == output);
        if same {
            self.repeats += 1;
        } else {
            self.last = Some((tool.to_string(), input.clone(), output.to_string()));
            self.repeats = 1;
        }
        (self.repeats >= THRESHOLD).then(|| {
            format!(
                "[LOOP_DETECTED: this is call {n} in a row of {tool} with the same input, and it \
                 returned the same output each time. Repeating it will not change the result: use \
                 the output you already have, or change the input or your approach.]",
                n = self.repeats
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn three_identical_calls_trigger_and_a_change_resets() {
        let mut d = LoopDetector::default();
        let input = json!({"a": 1, "b": 2});
        assert!(d.observe("t", &input, "x").is_none());
        assert!(d.observe("t", &json!({"b": 2, "a": 1}), "x").is_none());
        assert!(d.observe("t", &input, "x").is_some());
        assert!(d.observe("t", &input, "x").is_some());
        assert!(d.observe("t", &input, "y").is_none());
        assert!(d.observe("t", &input, "y").is_none());
        assert!(d.observe("u", &input, "y").is_none());
    }
}
