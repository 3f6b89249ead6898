//! Turn counters: how many calls of each sort a turn made, shown after the turn.

use serde_json::{Map, Value};

use crate::bindings::Counter;

/// The counters every session reports, even at zero, in display order.
const STANDARD: &[&str] = &["commands", "file_ops", "skills"];

/// The counts of the current turn.
#[derive(Default)]
pub struct Counters {
    counts: Vec<(Counter, u64)>,
}

impl Counters {
    /// Adds one call to `counter`.
    pub fn add(&mut self, counter: &Counter) {
        match self.counts.iter_mut().find(|(c, _)| c.key == counter.key) {
            Some((_, n)) => *n += 1,
            None => self.counts.push((counter.clone(), 1)),
        }
    }

    /// The counts as a JSON object: the standard counters always, others when non-zero.
    pub fn json(&self) -> Value {
        let mut map = Map::new();
        for key in STANDARD {
            map.insert(key.to_string(), 0.into());
        }
        for (counter, n) in &self.counts {
            map.insert(counter.key.clone(), (*n).into());
        }
        Value::Object(map)
    }

    /// The non-zero counters as one line, e.g. `⚙ 2 commands  📝 1 file op`, escaped (a
    /// counter's icon and nouns are a plugin's); empty when the turn made no call.
    pub fn display(&self) -> String {
        let rank = |key: &str| {
            STANDARD
                .iter()
                .position(|k| *k == key)
                .unwrap_or(STANDARD.len())
        };
        let mut counts: Vec<_> = self.counts.iter().collect();
        counts.sort_by_key(|(c, _)| rank(&c.key));
        let line = counts
            .iter()
            .map(|(c, n)| {
                let noun = if *n == 1 { &c.singular } else { &c.plural };
                format!("{} {n} {noun}", c.icon)
            })
            .collect::<Vec<_>>()
            .join("  ");
        super::display::escape(&line).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(key: &str, icon: &str, one: &str, many: &str) -> Counter {
        Counter {
            key: key.into(),
            icon: icon.into(),
            singular: one.into(),
            plural: many.into(),
        }
    }

    #[test]
    fn singular_plural_order_and_zeroes() {
        let files = counter("file_ops", "📝", "file op", "file ops");
        let commands = counter("commands", "⚙", "command", "commands");
        let mut c = Counters::default();
        assert_eq!(c.display(), "");
        c.add(&files);
        c.add(&commands);
        c.add(&commands);
        assert_eq!(c.display(), "⚙ 2 commands  📝 1 file op");
        assert_eq!(
            c.json(),
            serde_json::json!({"commands": 2, "file_ops": 1, "skills": 0})
        );
    }
}
