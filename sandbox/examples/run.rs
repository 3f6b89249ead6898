//! Runs one command confined, the way cordon's `bash` tool does, without the rest of cordon:
//! `cargo run -p cordon-sandbox --example run -- WORKSPACE COMMAND`. It prints the output,
//! then how the command ended on standard error.

fn main() {
    cordon_sandbox::run_helper_if_asked();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workspace, command] = args.as_slice() else {
        eprintln!("usage: run WORKSPACE COMMAND");
        std::process::exit(2);
    };
    let policy = cordon_sandbox::Policy::new(workspace.into());
    let done = cordon_sandbox::run(&policy, command);
    print!("{}", done.output);
    eprintln!("{:?}", done.status);
}
