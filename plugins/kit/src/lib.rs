//! The guest side of cordon's plugin contract, for plugins written in Rust.
//!
//! A tool is a type implementing [`Tool`]; [`export_tools!`] turns one or more of them into the
//! `cordon:tool/tool` export of a component. Build the crate as a `cdylib` for
//! `wasm32-wasip2` and the result is a component cordon can load.
//!
//! The kit also holds what every file-handling tool needs and must get right the same way:
//! [`path::resolve`] confines a model-given path to the tool's directory before anything
//! touches the file system, and [`path::describe`] turns an I/O error into text a model can act
//! on. The WASI grants enforce confinement regardless; these give the clear messages.
//!
//! [`diff`] renders the numbered line diffs `write_file` and `edit_file` show, and [`textfile`]
//! holds what the built-in file tools share (messages, reading a file, the host's atomic
//! replacement). [`input_schema`] derives a tool's input schema from its input type.

pub mod diff;
pub mod lines;
pub mod path;
mod schema;
pub mod textfile;

pub use schema::input_schema;

/// Bindings generated from `wit/cordon.wit`.
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "plugin-with-capabilities",
        pub_export_macro: true,
        default_bindings_module: "cordon_kit::bindings",
    });
}

pub use bindings::cordon::tool::types::{
    Context, Counter, Declaration, Diff, Display, Kind, Location, Outcome,
};
pub use bindings::cordon::tool::{files, shell};
use serde::de::DeserializeOwned;

/// One tool: its declaration and the function that runs a call.
pub trait Tool {
    /// The name the tool is declared and called under.
    const NAME: &'static str;

    /// The input, deserialized from the JSON object the host already validated against the
    /// declared schema.
    type Input: DeserializeOwned;

    /// The declaration the host shows the model, or none when the tool has nothing to offer
    /// in `cwd` (its grant); its `name` must be [`Tool::NAME`].
    fn declaration(cwd: &str) -> Option<Declaration>;

    /// Whether `input` itself asks for a dry run, as `edit_file`'s `dry_run` field does. The
    /// context [`Tool::call`] gets then has `dry_run` set as if the host had asked, so a tool
    /// checks the one flag.
    fn dry_run(_input: &Self::Input) -> bool {
        false
    }

    /// Runs one call. An `Err` is a failed outcome with that text: a missing file, a refused
    /// edit, anything the model should read and act on.
    fn call(input: Self::Input, context: &Context) -> Result<Outcome, String>;
}

/// Exports the given [`Tool`] types as this component's `cordon:tool/tool` interface.
#[macro_export]
macro_rules! export_tools {
    ($($tool:ty),+ $(,)?) => {
        struct CordonTools;

        impl $crate::bindings::exports::cordon::tool::tool::Guest for CordonTools {
            fn tools(cwd: ::std::string::String) -> ::std::vec::Vec<$crate::Declaration> {
                [$(<$tool as $crate::Tool>::declaration(&cwd)),+]
                    .into_iter()
                    .flatten()
                    .collect()
            }

            fn call(
                name: ::std::string::String,
                input: ::std::string::String,
                context: $crate::Context,
            ) -> $crate::Outcome {
                $(
                    if name == <$tool as $crate::Tool>::NAME {
                        return $crate::run::<$tool>(&input, &context);
                    }
                )+
                $crate::Outcome::failure(format!("this plugin has no tool named {name:?}"))
            }
        }

        $crate::bindings::export!(CordonTools with_types_in $crate::bindings);
    };
}

/// Runs one call of `T`: parses the input, calls the tool, turns an `Err` into a failed
/// outcome. [`export_tools!`] calls it.
#[doc(hidden)]
pub fn run<T: Tool>(input: &str, context: &Context) -> Outcome {
    // The host validated the input against the schema, so this fails only when the schema and
    // `T::Input` disagree; the message still names the problem.
    match serde_json::from_str::<T::Input>(input) {
        Ok(input) => {
            let context = Context {
                dry_run: context.dry_run || T::dry_run(&input),
                ..context.clone()
            };
            T::call(input, &context).unwrap_or_else(Outcome::failure)
        }
        Err(e) => Outcome::failure(format!("invalid input for {}: {e}", T::NAME)),
    }
}

impl Declaration {
    /// A tool named `name` of `kind`, described to the model by `description`, taking input
    /// of `input_schema` (see [`input_schema`]). Until [`Declaration::shown_as`] and
    /// [`Declaration::counted_as`] say otherwise, it is shown as `🔧 name` with its output
    /// previewed, and counted under a counter of its own.
    pub fn new(
        name: &str,
        kind: Kind,
        description: impl Into<String>,
        input_schema: String,
    ) -> Self {
        Declaration {
            name: name.into(),
            description: description.into(),
            input_schema,
            kind,
            display: Display {
                icon: "🔧".into(),
                key_argument: None,
                preview_output: true,
            },
            counter: Counter::new(
                name,
                "🔧",
                &format!("{name} call"),
                &format!("{name} calls"),
            ),
        }
    }

    /// Shows the tool's header as `<icon> <name>: <value of key_argument>`.
    pub fn shown_as(mut self, icon: &str, key_argument: Option<&str>) -> Self {
        self.display.icon = icon.into();
        self.display.key_argument = key_argument.map(Into::into);
        self
    }

    /// Keeps the tool's output off the terminal display (for long reference text).
    pub fn without_preview(mut self) -> Self {
        self.display.preview_output = false;
        self
    }

    /// Counts the tool's calls under `counter`.
    pub fn counted_as(mut self, counter: Counter) -> Self {
        self.counter = counter;
        self
    }
}

impl Counter {
    /// A turn counter shown as `<icon> <n> <singular|plural>` and keyed `key` in JSON.
    pub fn new(key: &str, icon: &str, singular: &str, plural: &str) -> Self {
        Counter {
            key: key.into(),
            icon: icon.into(),
            singular: singular.into(),
            plural: plural.into(),
        }
    }
}

impl Outcome {
    /// A completed call whose output is `output`.
    pub fn success(output: impl Into<String>) -> Self {
        Self {
            output: output.into(),
            trailer: None,
            omitted_bytes: 0,
            failed: false,
            locations: Vec::new(),
            diff: None,
        }
    }

    /// A failed call; `output` tells the model what went wrong and, where it can, what to do.
    pub fn failure(output: impl Into<String>) -> Self {
        Self {
            failed: true,
            ..Self::success(output)
        }
    }

    /// Adds a status line that the host keeps through truncation.
    pub fn with_trailer(mut self, trailer: impl Into<String>) -> Self {
        self.trailer = Some(trailer.into());
        self
    }

    /// Records a file the call read or changed.
    pub fn with_location(mut self, path: impl Into<String>, line: Option<u32>) -> Self {
        self.locations.push(Location {
            path: path.into(),
            line,
        });
        self
    }

    /// Records the change the call made, or would make in a dry run, if the host wants it
    /// (`context.want_diff`); otherwise the texts are dropped here, never copied to the host.
    pub fn with_diff(
        mut self,
        context: &Context,
        path: impl Into<String>,
        old: Option<String>,
        new: String,
    ) -> Self {
        if context.want_diff {
            self.diff = Some(Diff {
                path: path.into(),
                old_text: old,
                new_text: new,
            });
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// Answers with the `dry_run` of the context it is called with.
    struct Echo;

    #[derive(Deserialize)]
    struct AsksDryRun {
        dry_run: bool,
    }

    impl Tool for Echo {
        const NAME: &'static str = "echo";
        type Input = AsksDryRun;

        fn declaration(_: &str) -> Option<Declaration> {
            None
        }

        fn dry_run(input: &AsksDryRun) -> bool {
            input.dry_run
        }

        fn call(_: AsksDryRun, context: &Context) -> Result<Outcome, String> {
            Ok(Outcome::success(context.dry_run.to_string()))
        }
    }

    #[test]
    fn a_call_is_a_dry_run_when_the_host_or_the_input_asks() {
        for (host, input, dry_run) in [
            (false, false, "false"),
            (true, false, "true"),
            (false, true, "true"),
        ] {
            let context = Context {
                cwd: "/".into(),
                dry_run: host,
                max_output: 0,
                want_diff: false,
            };
            let outcome = run::<Echo>(&format!("{{\"dry_run\": {input}}}"), &context);
            assert_eq!(outcome.output, dry_run, "host {host}, input {input}");
        }
    }
}
