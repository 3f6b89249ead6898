//! A plugin built against `cordon:tool` 0.9.0, a version cordon does not serve: cordon must
//! refuse it by name, before linking, saying which versions it serves and what to do.

wit_bindgen::generate!({
    path: "wit",
    world: "plugin",
});

use exports::cordon::tool::tool::Guest;

struct Future;

impl Guest for Future {
    fn tools(_cwd: String) -> Vec<String> {
        vec!["later".into()]
    }

    fn call(name: String, _input: String) -> String {
        format!("{name} ran")
    }
}

export!(Future);
