//! The smallest program that embeds the cordon library: `embed WORKSPACE COMMAND` runs
//! `COMMAND` with the built-in `bash` tool, confined to `WORKSPACE`, and prints the text the
//! model would see.
//!
//! The one thing an embedder must not forget is the first line of `main`: cordon runs each
//! command in a re-executed copy of this very program (`/proc/self/exe`), and that copy has to
//! become the sandbox helper before anything else runs.

use std::process::ExitCode;

use cordon::{Options, Runtime};

fn main() -> ExitCode {
    cordon::sandbox::run_helper_if_asked();

    let mut args = std::env::args().skip(1);
    let (Some(workspace), Some(command), None) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: embed WORKSPACE COMMAND");
        return ExitCode::from(2);
    };
    let async_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start the async runtime");
    let input = serde_json::json!({ "command": command }).to_string();
    let outcome = async_runtime.block_on(async {
        // Loads only the plugin of `bash`; `Runtime::new` would load every built-in tool.
        let runtime = Runtime::for_tool(Options::new(workspace), "bash").await?;
        Ok::<_, cordon::Error>(runtime.call("bash", &input, false).await)
    });
    match outcome {
        Ok(outcome) => {
            println!("{}", outcome.output);
            ExitCode::from(u8::from(outcome.failed))
        }
        Err(e) => {
            eprintln!("embed: {e}");
            ExitCode::from(2)
        }
    }
}
