//! `read_file`, `write_file` and `edit_file`, through the real binary: one test per row of the
//! reference tables, then confinement, permission bits, line endings and refusals.
//!
//! What `cordon call` does not print (locations, the diff record, the host's dry run) is checked
//! through the library's `Runtime`, which is the same pipeline.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{Cordon, Run};

/// Asserts the call completed and returns what it printed.
fn ok(run: Run) -> String {
    assert_eq!(run.code, 0, "expected success: {run:?}");
    run.stdout
}

/// Asserts the call failed (exit 1) and returns what it printed.
fn failed(run: Run) -> String {
    assert_eq!(run.code, 1, "expected a failed outcome: {run:?}");
    run.stdout
}

/// The names of the entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Runs one call through the library, to see the locations and diff `cordon call` does not print.
fn call_lib(cordon: &Cordon, tool: &str, input: Value, dry_run: bool) -> cordon::CallOutcome {
    call_lib_with(cordon, tool, input, dry_run, true)
}

/// [`call_lib`], with or without the whole texts of a change (`Options::diffs`).
fn call_lib_with(
    cordon: &Cordon,
    tool: &str,
    input: Value,
    dry_run: bool,
    diffs: bool,
) -> cordon::CallOutcome {
    let mut options = cordon::Options::new(cordon.root());
    options.settings.tools.cache_dir = Some(crate::util::cache_dir().to_path_buf());
    options.diffs = diffs;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let runtime = cordon::Runtime::new(options)
                .await
                .expect("start the runtime");
            runtime.call(tool, &input.to_string(), dry_run).await
        })
}

fn kind_of(cordon: &Cordon, tool: &str) -> String {
    let run = cordon.run(&["tools", "--json"]);
    let tools: Vec<Value> = serde_json::from_str(&ok(run)).unwrap();
    let tool = tools.iter().find(|t| t["name"] == tool).unwrap();
    tool["kind"].as_str().unwrap().to_string()
}

const TEXT: &str = "one\ntwo\nthree\nfour\nfive\n";

// ---------------------------------------------------------------------------------------------
// read_file: fields

#[test]
fn read_path_is_relative_to_the_workspace() {
    let cordon = Cordon::new();
    cordon.write("src/notes.txt", TEXT);
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "src/notes.txt"}))),
        TEXT
    );
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "./src/../src/notes.txt"}))),
        TEXT
    );
    // An absolute path inside the workspace works too.
    let abs = cordon.path("src/notes.txt").display().to_string();
    assert_eq!(ok(cordon.call("read_file", json!({"path": abs}))), TEXT);
}

#[test]
fn read_start_is_the_first_line_and_0_is_the_start() {
    let cordon = Cordon::new();
    cordon.write("a.txt", TEXT);
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "a.txt", "start": 4}))),
        "four\nfive\n"
    );
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "a.txt", "start": 0}))),
        TEXT
    );
    let past = failed(cordon.call("read_file", json!({"path": "a.txt", "start": 9})));
    assert_eq!(past, "start 9 is past the end of a.txt, which has 5 lines");
}

#[test]
fn read_end_is_the_last_line_inclusive_and_0_is_the_end() {
    let cordon = Cordon::new();
    cordon.write("a.txt", TEXT);
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "a.txt", "start": 2, "end": 3}))),
        "two\nthree"
    );
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "a.txt", "end": 1}))),
        "one"
    );
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "a.txt", "end": 0}))),
        TEXT
    );
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "a.txt", "end": 99}))),
        TEXT
    );
    let backwards =
        failed(cordon.call("read_file", json!({"path": "a.txt", "start": 3, "end": 2})));
    assert_eq!(
        backwards,
        "end 2 is before start 3: give an end at or after the start, or end 0 to read to the end \
         of the file"
    );
}

#[test]
fn read_numbered_prefixes_each_line_with_its_number() {
    let cordon = Cordon::new();
    let text: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    cordon.write("a.txt", &text);
    assert_eq!(
        ok(cordon.call(
            "read_file",
            json!({"path": "a.txt", "start": 8, "end": 11, "numbered": true})
        )),
        " 8\tline 8\n 9\tline 9\n10\tline 10\n11\tline 11"
    );
    assert_eq!(
        ok(cordon.call(
            "read_file",
            json!({"path": "a.txt", "start": 11, "numbered": true})
        )),
        "11\tline 11\n12\tline 12\n"
    );
    assert_eq!(
        ok(cordon.call(
            "read_file",
            json!({"path": "a.txt", "end": 2, "numbered": false})
        )),
        "line 1\nline 2"
    );
}

// read_file: behaviour

#[test]
fn read_missing_file() {
    let cordon = Cordon::new();
    assert_eq!(
        failed(cordon.call("read_file", json!({"path": "nope/x.rs"}))),
        "nope/x.rs does not exist. Create it with write_file"
    );
}

#[test]
fn read_output_keeps_the_final_newline_only_at_the_end_of_the_file() {
    let cordon = Cordon::new();
    cordon.write("a.txt", TEXT);
    cordon.write("open.txt", "no\nfinal newline");
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "a.txt", "start": 5}))),
        "five\n"
    );
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "a.txt", "end": 4}))),
        "one\ntwo\nthree\nfour"
    );
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "open.txt"}))),
        "no\nfinal newline"
    );
    cordon.write("empty.txt", "");
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "empty.txt"}))),
        ""
    );
}

#[test]
fn read_output_is_truncated_to_max_output_in_whole_lines() {
    let cordon = Cordon::new().with_args(&["--max-output", "30"]);
    let text: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
    cordon.write("big.txt", &text);
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "big.txt"}))),
        "line 1\nline 2\nline 3\nline 4\n\
         [output limit reached: lines 1-4 shown; continue with start 5]"
    );
    assert_eq!(
        ok(cordon.call(
            "read_file",
            json!({"path": "big.txt", "start": 5, "end": 6})
        )),
        "line 5\nline 6"
    );
}

#[test]
fn read_is_kind_read_with_the_absolute_path_as_location() {
    let cordon = Cordon::new();
    assert_eq!(kind_of(&cordon, "read_file"), "read");
    cordon.write("dir/a.txt", TEXT);
    let outcome = call_lib(
        &cordon,
        "read_file",
        json!({"path": "dir/a.txt", "start": 2}),
        false,
    );
    assert!(!outcome.failed, "{}", outcome.output);
    assert_eq!(outcome.locations.len(), 1);
    assert_eq!(
        Path::new(&outcome.locations[0].path),
        cordon.path("dir/a.txt")
    );
    assert_eq!(outcome.locations[0].line, Some(2));
    assert!(outcome.diff.is_none());
}

// ---------------------------------------------------------------------------------------------
// write_file: fields

#[test]
fn write_path_is_relative_and_parent_directories_are_created() {
    let cordon = Cordon::new();
    assert_eq!(
        ok(cordon.call(
            "write_file",
            json!({"path": "a/b/c.txt", "content": "x\ny\n"})
        )),
        "Created a/b/c.txt (2 lines)\n@@ -0,0 +1,2 @@\n1 + x\n2 + y"
    );
    assert_eq!(cordon.read("a/b/c.txt"), "x\ny\n");
    assert_eq!(entries(&cordon.root()), ["a"]);
}

#[test]
fn write_content_is_the_whole_file_exactly() {
    let cordon = Cordon::new();
    let content = "no final newline\n\ttabs and ünïcödé ✏️";
    let out = ok(cordon.call("write_file", json!({"path": "x.txt", "content": content})));
    assert!(out.starts_with("Created x.txt (2 lines)\n"), "{out}");
    assert!(
        out.ends_with("2 + \ttabs and ünïcödé ✏️\n\\ No newline at end of file"),
        "{out}"
    );
    assert_eq!(cordon.read("x.txt"), content);
    ok(cordon.call("write_file", json!({"path": "empty.txt", "content": ""})));
    assert_eq!(cordon.read("empty.txt"), "");
}

// write_file: behaviour

#[test]
fn write_replaces_an_existing_file_entirely() {
    let cordon = Cordon::new();
    cordon.write("a.txt", TEXT);
    assert_eq!(
        ok(cordon.call(
            "write_file",
            json!({"path": "a.txt", "content": "one\n2\nthree\n"})
        )),
        "Updated a.txt: +1 -3 lines\n\
         @@ -1,5 +1,3 @@\n\
         1   one\n\
         2 - two\n\
         2 + 2\n\
         3   three\n\
         4 - four\n\
         5 - five"
    );
    assert_eq!(cordon.read("a.txt"), "one\n2\nthree\n");
}

#[test]
fn write_identical_content_writes_nothing_and_says_so() {
    let cordon = Cordon::new();
    let path = cordon.write("a.txt", TEXT);
    let before = fs::metadata(&path).unwrap();
    assert_eq!(
        ok(cordon.call("write_file", json!({"path": "a.txt", "content": TEXT}))),
        "a.txt already has this content; nothing was written."
    );
    let after = fs::metadata(&path).unwrap();
    assert_eq!(after.ino(), before.ino(), "the file was not replaced");
    assert_eq!(after.mtime_nsec(), before.mtime_nsec());
}

#[test]
fn write_output_is_a_headline_and_a_numbered_diff() {
    let cordon = Cordon::new();
    let old: String = (1..=20).map(|i| format!("l{i}\n")).collect();
    cordon.write("a.txt", &old);
    let new = old.replace("l2\n", "two\n").replace("l18\n", "");
    assert_eq!(
        ok(cordon.call("write_file", json!({"path": "a.txt", "content": new}))),
        "Updated a.txt: +1 -2 lines\n\
         @@ -1,5 +1,5 @@\n\
         \x201   l1\n\
         \x202 - l2\n\
         \x202 + two\n\
         \x203   l3\n\
         \x204   l4\n\
         \x205   l5\n\
         @@ -15,6 +15,5 @@\n\
         15   l15\n\
         16   l16\n\
         17   l17\n\
         18 - l18\n\
         18   l19\n\
         19   l20"
    );
}

#[test]
fn write_output_diff_is_cut_at_max_output_with_a_count() {
    let cordon = Cordon::new().with_args(&["--max-output", "60"]);
    let content: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    assert_eq!(
        ok(cordon.call("write_file", json!({"path": "a.txt", "content": content}))),
        "Created a.txt (100 lines)\n@@ -0,0 +1,100 @@\n  1 + line 1\n\
         [output limit reached: 99 more diff lines not shown]"
    );
    assert_eq!(cordon.read("a.txt"), content, "the whole file was written");
}

#[test]
fn write_is_kind_edit_and_the_change_travels_as_a_diff() {
    let cordon = Cordon::new();
    assert_eq!(kind_of(&cordon, "write_file"), "edit");
    let created = call_lib(
        &cordon,
        "write_file",
        json!({"path": "n.txt", "content": "new\n"}),
        false,
    );
    assert!(!created.failed, "{}", created.output);
    let diff = created.diff.expect("a diff for a created file");
    assert_eq!(Path::new(&diff.path), cordon.path("n.txt"));
    assert_eq!(diff.old_text, None, "a new-file diff");
    assert_eq!(diff.new_text, "new\n");
    assert_eq!(Path::new(&created.locations[0].path), cordon.path("n.txt"));

    let updated = call_lib(
        &cordon,
        "write_file",
        json!({"path": "n.txt", "content": "newer\n"}),
        false,
    );
    let diff = updated.diff.expect("a diff for an updated file");
    assert_eq!(diff.old_text.as_deref(), Some("new\n"));
    assert_eq!(diff.new_text, "newer\n");
    assert_eq!(updated.locations[0].line, Some(1));
}

#[test]
fn without_diffs_the_texts_stay_in_the_plugin_and_nothing_else_changes() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\ntwo\n");
    let calls = [
        (
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old": "two", "new": "2"}]}),
        ),
        (
            "write_file",
            json!({"path": "a.txt", "content": "one\ntwo\n"}),
        ),
    ];
    for (tool, input) in calls {
        let with = call_lib_with(&cordon, tool, input.clone(), true, true);
        let without = call_lib_with(&cordon, tool, input.clone(), true, false);
        assert!(with.diff.is_some(), "{tool}: diffs on carry the texts");
        assert!(without.diff.is_none(), "{tool}: diffs off leave them out");
        assert_eq!(
            with.output, without.output,
            "{tool}: the model's text is the same"
        );
        assert_eq!(with.locations.len(), without.locations.len());
        let written = call_lib_with(&cordon, tool, input, false, false);
        assert!(!written.failed, "{}", written.output);
        assert!(written.diff.is_none());
    }
    assert_eq!(
        cordon.read("a.txt"),
        "one\ntwo\n",
        "edited, then written back"
    );
}

#[test]
fn write_dry_run_from_the_host_writes_nothing() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "old\n");
    let outcome = call_lib(
        &cordon,
        "write_file",
        json!({"path": "a.txt", "content": "new\n"}),
        true,
    );
    assert!(!outcome.failed, "{}", outcome.output);
    assert_eq!(
        outcome.output,
        "Dry run, nothing written: would update a.txt: +1 -1 lines\n@@ -1,1 +1,1 @@\n1 - old\n1 + new"
    );
    assert_eq!(outcome.diff.unwrap().new_text, "new\n");
    assert_eq!(cordon.read("a.txt"), "old\n");

    let outcome = call_lib(
        &cordon,
        "write_file",
        json!({"path": "d/e/n.txt", "content": "x\n"}),
        true,
    );
    assert_eq!(
        outcome.output,
        "Dry run, nothing written: would create d/e/n.txt (1 line)\n@@ -0,0 +1,1 @@\n1 + x"
    );
    assert_eq!(
        entries(&cordon.root()),
        ["a.txt"],
        "not even the directories were created"
    );
}

// ---------------------------------------------------------------------------------------------
// edit_file: fields

#[test]
fn edit_path_must_name_an_existing_file() {
    let cordon = Cordon::new();
    assert_eq!(
        failed(cordon.call(
            "edit_file",
            json!({"path": "src/x.rs", "edits": [{"old": "a", "new": "b"}]})
        )),
        "src/x.rs does not exist. Create it with write_file"
    );
    assert!(!cordon.path("src").exists());
}

#[test]
fn edit_edits_are_all_applied() {
    let cordon = Cordon::new();
    cordon.write("a.txt", TEXT);
    let out = ok(cordon.call(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old": "four", "new": "FOUR"}, {"old": "two\n", "new": "2\n2.5\n"}]}),
    ));
    assert!(
        out.starts_with("Edited a.txt: 2 edits applied, +3 -2 lines, first change at line 2\n"),
        "{out}"
    );
    assert_eq!(cordon.read("a.txt"), "one\n2\n2.5\nthree\nFOUR\nfive\n");
}

#[test]
fn edit_old_is_exact_text_present_exactly_once() {
    let cordon = Cordon::new();
    cordon.write("a.py", "def f():\n    return 1\n");
    // Indentation is part of the text: a mismatch is not found.
    let out = failed(cordon.call(
        "edit_file",
        json!({"path": "a.py", "edits": [{"old": "def f():\n  return 1", "new": "x"}]}),
    ));
    assert!(out.contains("edit 1: old text not found in a.py"), "{out}");
    ok(cordon.call(
        "edit_file",
        json!({"path": "a.py", "edits": [{"old": "    return 1", "new": "    return 2"}]}),
    ));
    assert_eq!(cordon.read("a.py"), "def f():\n    return 2\n");
}

#[test]
fn edit_empty_new_deletes_the_matched_text() {
    let cordon = Cordon::new();
    cordon.write("a.txt", TEXT);
    assert_eq!(
        ok(cordon.call(
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old": "three\n", "new": ""}]})
        )),
        "Edited a.txt: 1 edit applied, +0 -1 lines, first change at line 3\n\
         @@ -1,5 +1,4 @@\n\
         1   one\n\
         2   two\n\
         3 - three\n\
         3   four\n\
         4   five"
    );
    assert_eq!(cordon.read("a.txt"), "one\ntwo\nfour\nfive\n");
}

#[test]
fn edit_dry_run_reports_and_writes_nothing() {
    let cordon = Cordon::new();
    let path = cordon.write("a.txt", TEXT);
    let before = fs::metadata(&path).unwrap();
    assert_eq!(
        ok(cordon.call(
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old": "five", "new": "5"}], "dry_run": true}),
        )),
        "Dry run, nothing written: would edit a.txt: 1 edit, +1 -1 lines, first change at line 5\n\
         @@ -2,4 +2,4 @@\n\
         2   two\n\
         3   three\n\
         4   four\n\
         5 - five\n\
         5 + 5"
    );
    assert_eq!(cordon.read("a.txt"), TEXT);
    assert_eq!(fs::metadata(&path).unwrap().ino(), before.ino());
    // The host's own dry run (for a permission request) behaves the same.
    let outcome = call_lib(
        &cordon,
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old": "five", "new": "5"}]}),
        true,
    );
    assert!(
        outcome
            .output
            .starts_with("Dry run, nothing written: would edit a.txt: 1 edit"),
        "{}",
        outcome.output
    );
    assert_eq!(outcome.diff.unwrap().new_text, TEXT.replace("five", "5"));
    assert_eq!(cordon.read("a.txt"), TEXT);
}

// edit_file: rules

#[test]
fn edit_refused_when_old_is_not_found() {
    let cordon = Cordon::new();
    cordon.write("a.txt", TEXT);
    assert_eq!(
        failed(cordon.call(
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old": "six", "new": "6"}]})
        )),
        "Nothing was written to a.txt; fix these edits and send them all again:\n\
         edit 1: old text not found in a.txt. It must match the file exactly, whitespace and \
         indentation included, without read_file line numbers; read the file and copy the text."
    );
    assert_eq!(cordon.read("a.txt"), TEXT);
}

#[test]
fn edit_refused_when_old_is_ambiguous() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n");
    assert_eq!(
        failed(cordon.call(
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old": "y", "new": "Y"}, {"old": "x = 1", "new": "x = 0"}]}),
        )),
        "Nothing was written to a.txt; fix these edits and send them all again:\n\
         edit 2: old text occurs 3 times in a.txt (at lines 1, 3 and 5); include more \
         surrounding lines in old so that it occurs exactly once."
    );
    assert_eq!(cordon.read("a.txt"), "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n");
}

#[test]
fn edit_refused_when_old_is_empty() {
    let cordon = Cordon::new();
    cordon.write("a.txt", TEXT);
    let out = failed(cordon.call(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old": "", "new": "x"}]}),
    ));
    assert!(out.ends_with("edit 1: old is empty; give the exact text to replace (to write a whole file, use write_file)"), "{out}");
    assert_eq!(cordon.read("a.txt"), TEXT);
}

#[test]
fn edit_refused_when_edits_overlap_nest_or_repeat() {
    let cordon = Cordon::new();
    let text = "alpha beta gamma\ndelta\n";
    cordon.write("a.txt", text);
    let head = "Nothing was written to a.txt; fix these edits and send them all again:\n";
    let call =
        |edits: Value| failed(cordon.call("edit_file", json!({"path": "a.txt", "edits": edits})));
    assert_eq!(
        call(json!([{"old": "alpha beta", "new": "1"}, {"old": "beta gamma", "new": "2"}])),
        format!(
            "{head}edits 1 and 2 overlap (line 1); merge them into one edit or make their old texts disjoint."
        )
    );
    assert_eq!(
        call(json!([{"old": "alpha beta gamma", "new": "1"}, {"old": "beta", "new": "2"}])),
        format!("{head}edit 2's old text lies inside edit 1's (line 1); merge them into one edit.")
    );
    assert_eq!(
        call(
            json!([{"old": "delta", "new": "1"}, {"old": "gamma", "new": "g"}, {"old": "delta", "new": "2"}])
        ),
        format!("{head}edits 1 and 3 replace the same text (line 2); merge them into one edit.")
    );
    assert_eq!(cordon.read("a.txt"), text);
}

#[test]
fn edit_edits_are_resolved_against_the_original_never_in_cascade() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "a\nb\n");
    // Edit 1 produces a second "b"; edit 2 still finds the single original one.
    ok(cordon.call(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old": "a", "new": "b"}, {"old": "b", "new": "c"}]}),
    ));
    assert_eq!(cordon.read("a.txt"), "b\nc\n");
    // Text that only exists after another edit is not found.
    let out = failed(cordon.call(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old": "c", "new": "xyz"}, {"old": "xyz", "new": "w"}]}),
    ));
    assert!(out.contains("edit 2: old text not found"), "{out}");
    assert_eq!(cordon.read("a.txt"), "b\nc\n");
    // Swapping two names in one call.
    ok(cordon.call(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old": "b", "new": "c"}, {"old": "c", "new": "b"}]}),
    ));
    assert_eq!(cordon.read("a.txt"), "c\nb\n");
}

#[test]
fn edit_any_refused_edit_means_nothing_is_written() {
    let cordon = Cordon::new();
    let path = cordon.write("a.txt", TEXT);
    let before = fs::metadata(&path).unwrap();
    let out = failed(cordon.call(
        "edit_file",
        json!({"path": "a.txt", "edits": [
            {"old": "one", "new": "1"},
            {"old": "missing", "new": "2"},
            {"old": "five", "new": "5"},
            {"old": "", "new": "x"}
        ]}),
    ));
    assert!(out.contains("\nedit 2: old text not found"), "{out}");
    assert!(out.contains("\nedit 4: old is empty"), "{out}");
    assert!(
        !out.contains("edit 1:") && !out.contains("edit 3:"),
        "{out}"
    );
    assert_eq!(cordon.read("a.txt"), TEXT);
    assert_eq!(fs::metadata(&path).unwrap().ino(), before.ino());
    assert_eq!(entries(&cordon.root()), ["a.txt"], "no temporary file left");
}

// edit_file: behaviour

#[test]
fn edit_output_is_a_headline_and_a_numbered_diff() {
    let cordon = Cordon::new();
    let text: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    cordon.write("a.txt", &text);
    assert_eq!(
        ok(cordon.call(
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old": "line 9\n", "new": "nine\n"}, {"old": "line 11", "new": "eleven"}]}),
        )),
        "Edited a.txt: 2 edits applied, +2 -2 lines, first change at line 9\n\
         @@ -6,7 +6,7 @@\n\
         \x206   line 6\n\
         \x207   line 7\n\
         \x208   line 8\n\
         \x209 - line 9\n\
         \x209 + nine\n\
         10   line 10\n\
         11 - line 11\n\
         11 + eleven\n\
         12   line 12"
    );
}

#[test]
fn edit_leaving_the_file_unchanged_writes_nothing() {
    let cordon = Cordon::new();
    let path = cordon.write("a.txt", TEXT);
    let before = fs::metadata(&path).unwrap();
    assert_eq!(
        ok(cordon.call(
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old": "two", "new": "two"}]})
        )),
        "The edits leave a.txt unchanged; nothing was written."
    );
    assert_eq!(fs::metadata(&path).unwrap().ino(), before.ino());
}

#[test]
fn edit_is_kind_edit_and_the_change_travels_with_old_and_new_text() {
    let cordon = Cordon::new();
    assert_eq!(kind_of(&cordon, "edit_file"), "edit");
    cordon.write("a.txt", TEXT);
    let outcome = call_lib(
        &cordon,
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old": "three", "new": "3"}]}),
        false,
    );
    assert!(!outcome.failed, "{}", outcome.output);
    let diff = outcome.diff.expect("a diff");
    assert_eq!(Path::new(&diff.path), cordon.path("a.txt"));
    assert_eq!(diff.old_text.as_deref(), Some(TEXT));
    assert_eq!(diff.new_text, "one\ntwo\n3\nfour\nfive\n");
    assert_eq!(Path::new(&outcome.locations[0].path), cordon.path("a.txt"));
    assert_eq!(outcome.locations[0].line, Some(3));
}

// ---------------------------------------------------------------------------------------------
// Confinement

/// Every way of naming a path outside the workspace, for every tool: refused, nothing changed.
#[test]
fn escapes_are_refused_for_every_tool() {
    let outside = tempfile::tempdir().unwrap();
    let outside_root = outside.path().canonicalize().unwrap();
    let victim = outside_root.join("victim.txt");
    fs::write(&victim, "outside\n").unwrap();
    let cordon = Cordon::new();
    let ws = cordon.root();
    // Both temporary directories are in the same parent: climb out and into the other one.
    let dotdot = format!(
        "../{}/victim.txt",
        outside_root.file_name().unwrap().to_string_lossy()
    );
    for path in [
        "../victim.txt".to_string(),
        dotdot,
        victim.display().to_string(),
        "/etc/passwd".to_string(),
        "~/victim.txt".to_string(),
        "~".to_string(),
    ] {
        for (tool, input) in [
            ("read_file", json!({"path": path})),
            ("write_file", json!({"path": path, "content": "pwned\n"})),
            (
                "edit_file",
                json!({"path": path, "edits": [{"old": "outside", "new": "pwned"}]}),
            ),
        ] {
            let out = failed(cordon.call(tool, input));
            assert!(
                out.contains("is outside the workspace"),
                "{tool} {path}: {out}"
            );
        }
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "outside\n");
    assert_eq!(entries(&outside_root), ["victim.txt"]);
    assert!(entries(&ws).is_empty());
    assert!(!ws.parent().unwrap().join("victim.txt").exists());
}

#[test]
fn a_symlink_leading_out_is_refused_for_reading_and_writing() {
    let outside = tempfile::tempdir().unwrap();
    let outside_root = outside.path().canonicalize().unwrap();
    let victim = outside_root.join("victim.txt");
    fs::write(&victim, "outside\n").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).unwrap();
    let cordon = Cordon::new();
    symlink(&victim, cordon.path("file-link")).unwrap();
    symlink(&outside_root, cordon.path("dir-link")).unwrap();
    symlink(
        outside_root.join("not-yet.txt"),
        cordon.path("dangling-link"),
    )
    .unwrap();

    let name = outside_root.file_name().unwrap().to_string_lossy();
    symlink(format!("../{name}"), cordon.path("rel-dir-link")).unwrap();
    let refusal = |path: &str| {
        format!(
            "{path} cannot be accessed: it goes through the symbolic link {}, which leads \
             outside the workspace or has an absolute target; only links with a relative target \
             inside the workspace are followed",
            path.split('/').next().unwrap()
        )
    };
    for path in [
        "file-link",
        "dir-link/victim.txt",
        "rel-dir-link/victim.txt",
    ] {
        let out = failed(cordon.call("read_file", json!({"path": path})));
        assert_eq!(out, refusal(path));
        let out = failed(cordon.call(
            "edit_file",
            json!({"path": path, "edits": [{"old": "outside", "new": "pwned"}]}),
        ));
        assert_eq!(out, refusal(path));
    }
    for path in [
        "file-link",
        "dir-link/victim.txt",
        "dir-link/new.txt",
        "dir-link/sub/new.txt",
        "rel-dir-link/victim.txt",
        "rel-dir-link/new.txt",
        "dangling-link",
    ] {
        let out = failed(cordon.call("write_file", json!({"path": path, "content": "pwned\n"})));
        assert_eq!(out, refusal(path));
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "outside\n");
    assert_eq!(
        entries(&outside_root),
        ["victim.txt"],
        "nothing created outside"
    );
    assert!(
        fs::symlink_metadata(cordon.path("file-link"))
            .unwrap()
            .is_symlink(),
        "the link is kept"
    );
    assert_eq!(
        entries(&cordon.root()),
        ["dangling-link", "dir-link", "file-link", "rel-dir-link"],
        "no temporary file left"
    );
}

#[test]
fn a_symlink_staying_inside_works() {
    let cordon = Cordon::new();
    cordon.write("real/a.txt", TEXT);
    symlink("real/a.txt", cordon.path("link.txt")).unwrap();
    symlink("real", cordon.path("dir-link")).unwrap();
    symlink("../real/a.txt", cordon.path("real/up.txt")).unwrap();
    for path in ["link.txt", "dir-link/a.txt", "real/up.txt"] {
        assert_eq!(
            ok(cordon.call("read_file", json!({"path": path}))),
            TEXT,
            "{path}"
        );
    }
    ok(cordon.call(
        "edit_file",
        json!({"path": "link.txt", "edits": [{"old": "one", "new": "1"}]}),
    ));
    ok(cordon.call(
        "edit_file",
        json!({"path": "dir-link/a.txt", "edits": [{"old": "two", "new": "2"}]}),
    ));
    assert_eq!(cordon.read("real/a.txt"), "1\n2\nthree\nfour\nfive\n");
    ok(cordon.call(
        "write_file",
        json!({"path": "dir-link/new/b.txt", "content": "b\n"}),
    ));
    assert_eq!(cordon.read("real/new/b.txt"), "b\n");
    ok(cordon.call(
        "write_file",
        json!({"path": "link.txt", "content": "whole\n"}),
    ));
    assert_eq!(cordon.read("real/a.txt"), "whole\n");
    for link in ["link.txt", "dir-link"] {
        let meta = fs::symlink_metadata(cordon.path(link)).unwrap();
        assert!(meta.is_symlink(), "the link {link} is kept");
    }
    // The location is the path as named.
    let outcome = call_lib(&cordon, "read_file", json!({"path": "link.txt"}), false);
    assert_eq!(
        Path::new(&outcome.locations[0].path),
        cordon.path("link.txt")
    );
}

/// WASI follows no link whose target is an absolute path, even one inside the workspace: the
/// refusal names the link and says which links work.
#[test]
fn a_symlink_with_an_absolute_target_is_refused_naming_the_link() {
    let cordon = Cordon::new();
    cordon.write("real/a.txt", TEXT);
    symlink(cordon.path("real"), cordon.path("abs-dir")).unwrap();
    let expected = "abs-dir/a.txt cannot be accessed: it goes through the symbolic link abs-dir, \
                    which leads outside the workspace or has an absolute target; only links with \
                    a relative target inside the workspace are followed";
    assert_eq!(
        failed(cordon.call("read_file", json!({"path": "abs-dir/a.txt"}))),
        expected
    );
    assert_eq!(
        failed(cordon.call(
            "write_file",
            json!({"path": "abs-dir/a.txt", "content": "x"})
        )),
        expected
    );
    assert_eq!(cordon.read("real/a.txt"), TEXT);
}

// ---------------------------------------------------------------------------------------------
// Writing

#[test]
fn atomic_writes_keep_permission_bits() {
    let cordon = Cordon::new();
    let script = cordon.write("run.sh", "#!/bin/sh\necho old\n");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    ok(cordon.call(
        "edit_file",
        json!({"path": "run.sh", "edits": [{"old": "old", "new": "edited"}]}),
    ));
    assert_eq!(
        fs::metadata(&script).unwrap().permissions().mode() & 0o7777,
        0o755
    );
    assert_eq!(cordon.read("run.sh"), "#!/bin/sh\necho edited\n");
    ok(cordon.call(
        "write_file",
        json!({"path": "run.sh", "content": "#!/bin/sh\necho new\n"}),
    ));
    assert_eq!(
        fs::metadata(&script).unwrap().permissions().mode() & 0o7777,
        0o755
    );
    assert_eq!(cordon.read("run.sh"), "#!/bin/sh\necho new\n");

    let private = cordon.write("secret.txt", "a\n");
    fs::set_permissions(&private, fs::Permissions::from_mode(0o600)).unwrap();
    ok(cordon.call(
        "write_file",
        json!({"path": "secret.txt", "content": "b\n"}),
    ));
    assert_eq!(
        fs::metadata(&private).unwrap().permissions().mode() & 0o7777,
        0o600
    );
    assert_eq!(
        entries(&cordon.root()),
        ["run.sh", "secret.txt"],
        "no temporary file left"
    );
}

/// The temporary files of cordon's (`.NAME.cordon-….tmp`) in `dir` and below, links not
/// followed.
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            found.extend(temp_files(&entry.path()));
        } else if name.contains(".cordon-") && name.ends_with(".tmp") {
            found.push(entry.path());
        }
    }
    found
}

/// Waits until `child` holds a file open under `root` (the write has begun): true, or false
/// when it ended first.
fn writing_under(child: &mut Child, root: &Path) -> bool {
    let fds = PathBuf::from(format!("/proc/{}/fd", child.id()));
    let inside = format!("{}/", root.display());
    while child.try_wait().unwrap().is_none() {
        let open = fs::read_dir(&fds).into_iter().flatten().flatten();
        if open
            .filter_map(|fd| fs::read_link(fd.path()).ok())
            .any(|file| file.to_string_lossy().starts_with(&inside))
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// A `write_file` killed while it writes leaves no temporary file, whatever the moment of the
/// kill, and the file is either absent or whole.
#[test]
fn a_write_killed_midway_leaves_no_temporary_file() {
    let cordon = Cordon::new();
    let root = cordon.root();
    let size = 100 << 20;
    let input = Arc::new(json!({"path": "big.txt", "content": "x".repeat(size)}).to_string());
    // The write can end before it is seen: try a few times to kill one midway.
    for _ in 0..4 {
        let mut child = cordon
            .command()
            .args(["call", "write_file", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let input = Arc::clone(&input);
        // The kill breaks the pipe: a failed write is expected.
        let feeder = std::thread::spawn(move || drop(stdin.write_all(input.as_bytes())));
        let caught = writing_under(&mut child, &root);
        child.kill().unwrap();
        child.wait().unwrap();
        feeder.join().unwrap();
        assert_eq!(temp_files(&root), Vec::<PathBuf>::new());
        let big = cordon.path("big.txt");
        if let Ok(meta) = fs::metadata(&big) {
            assert_eq!(
                meta.len(),
                size as u64,
                "a part of the file was put in place"
            );
            fs::remove_file(&big).unwrap();
        }
        if caught {
            break;
        }
    }
    assert_eq!(entries(&root), Vec::<String>::new());
}

/// Swapping a parent directory for a link leading out, back and forth while files are
/// written, neither leaves a temporary file nor writes anything outside.
#[test]
fn a_parent_swapped_for_a_link_leaves_no_temporary_file_and_nothing_outside() {
    let cordon = Cordon::new();
    let root = cordon.root();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir(root.join("sub")).unwrap();
    symlink(outside.path(), root.join("link")).unwrap();
    let swap = {
        let (sub, link) = (root.join("sub"), root.join("link"));
        move || {
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                &sub,
                rustix::fs::CWD,
                &link,
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .unwrap()
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = std::thread::spawn({
        let (stop, swap) = (Arc::clone(&stop), swap.clone());
        move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                swap();
                swaps += 1;
            }
            swaps
        }
    });
    // Large enough to widen the moment between creating a file and renaming it.
    let content = "x".repeat(100 << 10);
    for n in 0..30 {
        // Each call fails or succeeds depending on the moment: only what is left counts.
        cordon.call(
            "write_file",
            json!({"path": format!("sub/new{n}.txt"), "content": content}),
        );
    }
    stop.store(true, Ordering::Relaxed);
    if swapper.join().unwrap() % 2 == 1 {
        swap();
    }
    assert!(root.join("sub").is_dir() && root.join("link").is_symlink());
    assert_eq!(temp_files(&root), Vec::<PathBuf>::new());
    assert_eq!(entries(outside.path()), Vec::<String>::new());
}

#[test]
fn crlf_files_keep_crlf() {
    let cordon = Cordon::new();
    cordon.write("win.txt", "one\r\ntwo\r\nthree\r\n");
    let out = ok(cordon.call(
        "edit_file",
        json!({"path": "win.txt", "edits": [{"old": "one\ntwo\n", "new": "1\n2\n2.5\n"}]}),
    ));
    assert_eq!(
        out,
        "Edited win.txt: 1 edit applied, +3 -2 lines, first change at line 1\n\
         @@ -1,3 +1,4 @@\n\
         1 - one\n\
         2 - two\n\
         1 + 1\n\
         2 + 2\n\
         3 + 2.5\n\
         4   three"
    );
    assert_eq!(cordon.read("win.txt"), "1\r\n2\r\n2.5\r\nthree\r\n");
    // An old text given with \r\n matches too.
    ok(cordon.call(
        "edit_file",
        json!({"path": "win.txt", "edits": [{"old": "2.5\r\nthree", "new": "3"}]}),
    ));
    assert_eq!(cordon.read("win.txt"), "1\r\n2\r\n3\r\n");
    // read_file shows the file as it is.
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "win.txt"}))),
        "1\r\n2\r\n3\r\n"
    );
    assert_eq!(
        ok(cordon.call("read_file", json!({"path": "win.txt", "end": 2}))),
        "1\r\n2"
    );
}

#[test]
fn non_utf8_files_are_refused() {
    let cordon = Cordon::new();
    let bytes = b"text\n\xff\xfe binary\n";
    cordon.write("blob.bin", bytes);
    assert_eq!(
        failed(cordon.call("read_file", json!({"path": "blob.bin"}))),
        "blob.bin is not UTF-8 text; read_file shows text files only"
    );
    assert_eq!(
        failed(cordon.call(
            "edit_file",
            json!({"path": "blob.bin", "edits": [{"old": "text", "new": "t"}]})
        )),
        "blob.bin is not UTF-8 text; edit_file edits text files only. Nothing was written."
    );
    assert_eq!(fs::read(cordon.path("blob.bin")).unwrap(), bytes);
}

#[test]
fn directories_are_refused() {
    let cordon = Cordon::new();
    cordon.write("dir/inner.txt", "x\n");
    let refusal = "dir is a directory, not a file; give the path of a file";
    assert_eq!(
        failed(cordon.call("read_file", json!({"path": "dir"}))),
        refusal
    );
    assert_eq!(
        failed(cordon.call("write_file", json!({"path": "dir", "content": "x"}))),
        refusal
    );
    assert_eq!(
        failed(cordon.call(
            "edit_file",
            json!({"path": "dir", "edits": [{"old": "x", "new": "y"}]})
        )),
        refusal
    );
    assert_eq!(entries(&cordon.path("dir")), ["inner.txt"]);
    assert!(cordon.path("dir").is_dir());
}

/// A trailing `/` (or `/.`) names a directory: every file tool refuses it, as POSIX does,
/// whether the name is a file, a directory or nothing yet, and nothing is created or changed.
#[test]
fn a_path_ending_in_a_slash_names_a_directory_and_is_refused() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "x\n");
    cordon.write("dir/inner.txt", "x\n");
    let refusal = |given: &str, end: &str| {
        format!("{given} ends with \"{end}\", which names a directory; give the path of a file")
    };
    for (given, end) in [
        ("a.txt/", "/"),
        ("a.txt/.", "/."),
        ("dir/", "/"),
        ("new/", "/"),
    ] {
        assert_eq!(
            failed(cordon.call("read_file", json!({"path": given}))),
            refusal(given, end)
        );
        assert_eq!(
            failed(cordon.call("write_file", json!({"path": given, "content": "y\n"}))),
            refusal(given, end)
        );
        assert_eq!(
            failed(cordon.call(
                "edit_file",
                json!({"path": given, "edits": [{"old": "x", "new": "y"}]})
            )),
            refusal(given, end)
        );
    }
    assert_eq!(entries(&cordon.root()), ["a.txt", "dir"]);
    assert_eq!(cordon.read("a.txt"), "x\n");
    assert_eq!(entries(&cordon.path("dir")), ["inner.txt"]);
}

#[test]
fn a_file_in_the_way_of_a_parent_is_refused() {
    let cordon = Cordon::new();
    cordon.write("file", "x\n");
    let out = failed(cordon.call(
        "write_file",
        json!({"path": "file/sub/a.txt", "content": "y"}),
    ));
    assert_eq!(
        out,
        "file/sub/a.txt: a parent of this path is a file, not a directory"
    );
    assert_eq!(cordon.read("file"), "x\n");
}
