//! A plugin that names `cordon:tool` 0.1.0 but exports another `tool` than 0.1.0 released:
//! cordon must refuse it saying so and what to do, not with wasmtime's type mismatch alone.

wit_bindgen::generate!({
    path: "wit",
    world: "plugin",
});

use exports::cordon::tool::tool::Guest;

struct Drifted;

impl Guest for Drifted {
    fn tools(_cwd: String) -> Vec<String> {
        vec!["drift".into()]
    }

    fn call(name: String, _input: String) -> String {
        format!("{name} ran")
    }
}

export!(Drifted);
