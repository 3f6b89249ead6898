//! Section 4, `edit`: `edit_file` of one line in a 100 000-line file against a native read +
//! replace + write (target: at most 3×), without the diffs `cordon call` and `cordon mcp` go
//! without; and, for information, with the ACP diffs `cordon session` carries.

use serde_json::json;

use cordon::Runtime;

use crate::fixture::{Dirs, hundred_thousand_lines};
use crate::harness::{interleaved, print_samples, samples};
use crate::in_process::Lib;
use crate::report::Report;

pub(crate) fn run(dirs: &Dirs, lib: &mut Lib, report: &mut Report) {
    println!(
        "\n# 4. `edit_file` of one line in a 100 000-line file vs native read + replace + write"
    );
    let content = hundred_thousand_lines();
    let (tool_path, native_path) = (dirs.ws.join("edit.txt"), dirs.ws.join("edit-native.txt"));
    std::fs::write(&tool_path, &content).unwrap();
    std::fs::write(&native_path, &content).unwrap();
    println!("  edit.txt: 100 000 lines, {} bytes", content.len());
    // `cordon call` and `cordon mcp` run without diffs (the target); `cordon session` and the
    // library's default carry the whole old and new text for ACP, measured alongside.
    let mut options = dirs.options();
    options.diffs = false;
    let without_diffs = lib
        .async_runtime
        .block_on(Runtime::new(options))
        .expect("the runtime starts");
    let (a, b) = (
        "let value_50000 = compute(50000,",
        "let value_50000 = compute(50001,",
    );
    let inputs = [a, b].map(|old| {
        let new = if old == a { b } else { a };
        json!({"path": "edit.txt", "edits": [{"old": old, "new": new}]}).to_string()
    });
    let n = samples(40);
    let mut native_flip = 0usize;
    let mut native = || {
        let (old, new) = if native_flip.is_multiple_of(2) {
            (a, b)
        } else {
            (b, a)
        };
        native_flip += 1;
        let text = std::fs::read_to_string(&native_path).unwrap();
        let edited = text.replacen(old, new, 1);
        assert_ne!(edited, text);
        std::fs::write(&native_path, edited).unwrap();
    };
    let (async_runtime, with_diffs) = (lib.async_runtime, lib.runtime);
    let flip = std::cell::Cell::new(0usize);
    let tool = |diffs: bool| {
        let runtime = if diffs { with_diffs } else { &without_diffs };
        let input = &inputs[flip.get() % 2];
        flip.set(flip.get() + 1);
        let out = async_runtime.block_on(runtime.call("edit_file", input, false));
        assert!(out.output.starts_with("Edited edit.txt"), "{}", out.output);
        assert_eq!(out.diff.is_some(), diffs);
    };
    let s = interleaved(
        n,
        &mut [&mut native, &mut || tool(false), &mut || tool(true)],
    );
    print_samples("native read + replacen + write", &s[0]);
    print_samples("edit_file (Runtime::call, diffs off)", &s[1]);
    print_samples("edit_file (Runtime::call, diffs on)", &s[2]);
    report.compare(
        "`edit_file` one line of a 100 000-line file vs native read + replace + write",
        &s[1],
        &s[0],
        "≤ 3×",
        Some(3.0),
    );
    report.compare(
        "the same with ACP diffs (`cordon session`): both whole texts leave the plugin",
        &s[2],
        &s[0],
        "(information)",
        None,
    );
    let _ = std::fs::remove_file(&native_path);
    let _ = std::fs::remove_file(&tool_path);
}
