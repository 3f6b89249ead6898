//! `read_skill`: declared only when the skills directory holds a skill, a description that ends
//! with the sorted catalogue, the flat file preferred over `SKILL.md`, the exact unknown-name
//! text, and no way out of the skills directory.

use serde_json::{Value, json};

use crate::util::Cordon;

/// A workspace whose `skills/` directory (passed as `--skills`) holds `files`.
fn with_skills(files: &[(&str, &[u8])]) -> Cordon {
    let cordon = Cordon::new();
    std::fs::create_dir_all(cordon.path("skills")).unwrap();
    for (rel, content) in files {
        cordon.write(&format!("skills/{rel}"), content);
    }
    let skills = cordon.path("skills");
    cordon.with_args(&["--skills", skills.to_str().unwrap()])
}

/// The `read_skill` entry of `cordon tools --json`, if declared.
fn declaration(cordon: &Cordon) -> Option<Value> {
    let run = cordon.run(&["tools", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let tools: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    tools.into_iter().find(|t| t["name"] == "read_skill")
}

/// The catalogue lines of the `read_skill` description (every line after the fixed sentence).
fn catalogue(cordon: &Cordon) -> Vec<String> {
    let declaration = declaration(cordon).expect("read_skill is declared");
    let description = declaration["description"].as_str().unwrap();
    let mut lines = description.lines();
    let intro = lines.next().unwrap();
    assert!(
        intro.starts_with("Returns the full text of a skill"),
        "{intro}"
    );
    lines.map(String::from).collect()
}

#[test]
fn not_declared_without_a_skill() {
    let plain = Cordon::new();
    assert!(declaration(&plain).is_none());
    let empty = with_skills(&[]);
    assert!(declaration(&empty).is_none());
    let no_skill = with_skills(&[
        ("notes.txt", b"not markdown"),
        ("docs/README.md", b"a directory without SKILL.md"),
        (".hidden.md", b"hidden files are not skills"),
    ]);
    assert!(declaration(&no_skill).is_none());
    let call = no_skill.call("read_skill", json!({"name": "notes"}));
    assert_eq!(call.code, 1);
    assert!(
        call.stdout.starts_with("Unknown tool \"read_skill\""),
        "{}",
        call.stdout
    );
}

#[test]
fn declared_with_one_skill_as_a_read_tool() {
    let cordon = with_skills(&[("only/SKILL.md", b"# Only\n\nThe only skill.\n")]);
    let declaration = declaration(&cordon).expect("read_skill is declared");
    assert_eq!(declaration["kind"], "read");
    let schema = &declaration["input_schema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], json!(["name"]));
    assert_eq!(schema["properties"]["name"]["type"], "string");
    assert_eq!(catalogue(&cordon), [" only — The only skill."]);
}

#[test]
fn catalogue_is_sorted_with_one_line_per_skill() {
    let cordon = with_skills(&[
        (
            "zeta.md",
            b"---\nname: zeta\ndescription: \"Quoted: last.\"\n---\n# Zeta\n",
        ),
        (
            "alpha/SKILL.md",
            b"---\ndescription: >\n  Folded\n  text.\n---\nBody.\n",
        ),
        (
            "mid.md",
            b"# Middle heading\n\nFirst paragraph line.\nSecond.\n",
        ),
        ("both.md", b"---\ndescription: The flat one.\n---\n"),
        ("both/SKILL.md", b"---\ndescription: The nested one.\n---\n"),
        ("heading.md", b"## Only a heading\n"),
        ("empty.md", b""),
        ("notes.txt", b"ignored"),
    ]);
    assert_eq!(
        catalogue(&cordon),
        [
            " alpha — Folded text.",
            " both — The flat one.",
            " empty — (no description)",
            " heading — Only a heading",
            " mid — First paragraph line.",
            " zeta — Quoted: last.",
        ]
    );
}

#[test]
fn call_returns_the_whole_markdown_preferring_the_flat_file() {
    let flat = "---\ndescription: Flat.\n---\n# Both\n\nFlat content.\n";
    let nested = "# Nested\n\nNested content.\n";
    let cordon = with_skills(&[
        ("both.md", flat.as_bytes()),
        ("both/SKILL.md", b"the nested twin, never read"),
        ("nested/SKILL.md", nested.as_bytes()),
    ]);
    let run = cordon.call("read_skill", json!({"name": "both"}));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, flat);
    let run = cordon.call("read_skill", json!({"name": "nested"}));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, nested);
}

#[test]
fn output_is_truncated_by_the_host() {
    let long = "x".repeat(500);
    let cordon = with_skills(&[("long.md", long.as_bytes())]).with_args(&["--max-output", "100"]);
    let run = cordon.call("read_skill", json!({"name": "long"}));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with(&"x".repeat(100)), "{}", run.stdout);
    assert!(!run.stdout.contains(&"x".repeat(101)), "{}", run.stdout);
}

#[test]
fn unknown_name_lists_the_skills() {
    let cordon = with_skills(&[
        ("c.md", b"c"),
        ("a.md", b"a"),
        ("b/SKILL.md", b"b"),
        ("a/SKILL.md", b"a again"),
    ]);
    for given in ["x", "a.md", "B", "b/SKILL.md/"] {
        let run = cordon.call("read_skill", json!({"name": given}));
        assert_eq!(run.code, 1, "{given}");
        assert_eq!(
            run.stdout,
            format!("No skill named \"{given}\". Available skills: a, b, c")
        );
    }
}

#[test]
fn names_cannot_reach_outside_the_skills_directory() {
    let cordon = with_skills(&[("deploy.md", b"deploy steps\n")]);
    cordon.write("secret.md", "SECRET outside the skills directory\n");
    cordon.write("secret/SKILL.md", "SECRET nested outside\n");
    let secret = cordon.path("secret.md");
    // A link inside the skills directory that leads out of it is not a skill either.
    std::os::unix::fs::symlink(&secret, cordon.path("skills/leak.md")).unwrap();
    std::os::unix::fs::symlink(cordon.path("secret"), cordon.path("skills/leakdir")).unwrap();
    assert_eq!(catalogue(&cordon), [" deploy — deploy steps"]);

    let absolute = secret.to_str().unwrap().to_string();
    let absolute_stem = absolute.trim_end_matches(".md").to_string();
    for given in [
        "../secret",
        "skills/../secret",
        "../../secret",
        absolute_stem.as_str(),
        absolute.as_str(),
        "..",
        ".",
        "",
        "leak",
        "leakdir",
    ] {
        let run = cordon.call("read_skill", json!({"name": given}));
        assert_eq!(run.code, 1, "{given}: {}", run.stdout);
        assert_eq!(
            run.stdout,
            format!("No skill named \"{given}\". Available skills: deploy")
        );
    }
    // Only the base name is used: a path ending in a skill's name reads that skill.
    let run = cordon.call("read_skill", json!({"name": "../elsewhere/deploy"}));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "deploy steps\n");
}

#[test]
fn a_skill_that_is_not_utf8_fails_clearly() {
    let cordon = with_skills(&[("bad.md", b"\xff\xfe not text")]);
    assert_eq!(catalogue(&cordon).len(), 1);
    let run = cordon.call("read_skill", json!({"name": "bad"}));
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stdout,
        format!(
            "The skill \"bad\" ({}) is not valid UTF-8 text, so it cannot be read.",
            cordon.path("skills/bad.md").display()
        )
    );
}
