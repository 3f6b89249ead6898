//! cordon's built-in `read_skill` tool.
//!
//! A skill is a markdown document in the skills directory, the plugin's only (read-only)
//! grant: `<dir>/<name>.md`, or `<dir>/<name>/SKILL.md` when there is no flat file. The tool
//! is declared only when the directory holds at least one skill; its description is a fixed
//! sentence followed by the catalogue, one ` <name> — <description>` line per skill sorted by
//! name (see [`describe()`] for where the description comes from). A call returns the whole
//! markdown of the named skill.
//!
//! Names starting with `.` (hidden files and directories) and names that are not valid UTF-8
//! are not skills. Only the final `/`-separated component of the name the model gives is used,
//! so a name can never reach outside the directory; the WASI grant enforces it regardless.

mod describe;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use cordon_kit::{Context, Counter, Declaration, Kind, Outcome, Tool};
use schemars::JsonSchema;
use serde::Deserialize;

pub use describe::{NO_DESCRIPTION, catalogue_line, describe};

/// The `read_skill` tool.
pub struct ReadSkill;

/// The sentence that opens the tool's description, before the catalogue.
pub const INTRO: &str = "Returns the full text of a skill: a markdown document of \
    instructions, conventions or reference material for one kind of task. Before starting \
    work that matches one of the skills listed below, read that skill and follow it. \
    Available skills:";

/// How much of a skill file is read to describe it in the catalogue.
const DESCRIBE_BYTES: u64 = 64 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Skill name, exactly as listed in the tool description.
    name: String,
}

impl Tool for ReadSkill {
    type Input = Input;
    const NAME: &'static str = "read_skill";

    fn declaration(cwd: &str) -> Option<Declaration> {
        let dir = Path::new(cwd);
        let names = skill_names(dir);
        if names.is_empty() {
            return None;
        }
        let catalogue: Vec<String> = names
            .iter()
            .map(|name| {
                let description = skill_file(dir, name)
                    .and_then(|path| read_head(&path))
                    .map(|text| describe(&text))
                    .unwrap_or_else(|| NO_DESCRIPTION.to_string());
                catalogue_line(name, &description)
            })
            .collect();
        Some(
            Declaration::new(
                Self::NAME,
                Kind::Read,
                format!("{INTRO}\n{}", catalogue.join("\n")),
                cordon_kit::input_schema::<Input>(),
            )
            .shown_as("📖", Some("name"))
            .without_preview()
            .counted_as(Counter::new("skills", "📖", "skill", "skills")),
        )
    }

    fn call(input: Input, context: &Context) -> Result<Outcome, String> {
        let dir = Path::new(&context.cwd);
        let Some(path) = base_name(&input.name).and_then(|name| skill_file(dir, name)) else {
            return Err(unknown(&input.name, &skill_names(dir)));
        };
        let shown = path.to_string_lossy().into_owned();
        let outcome = match fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => Outcome::success(text),
                Err(_) => Outcome::failure(format!(
                    "The skill \"{}\" ({shown}) is not valid UTF-8 text, so it cannot be read.",
                    input.name
                )),
            },
            Err(error) => Outcome::failure(format!(
                "The skill \"{}\" cannot be read: {}",
                input.name,
                cordon_kit::path::describe(&shown, &error)
            )),
        }
        .with_location(shown, None);
        Ok(outcome)
    }
}

cordon_kit::export_tools!(ReadSkill);

/// The text a call with an unknown skill name returns: `given` is the name as the model gave it.
pub fn unknown(given: &str, names: &BTreeSet<String>) -> String {
    let available = if names.is_empty() {
        "(none)".to_string()
    } else {
        names
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("No skill named \"{given}\". Available skills: {available}")
}

/// The name a call looks up: the final `/`-separated component of `given`, or none when that
/// is empty, `.` or `..`.
pub fn base_name(given: &str) -> Option<&str> {
    let last = given.rsplit('/').find(|part| !part.is_empty())?;
    (last != "." && last != "..").then_some(last)
}

/// Whether `name` may name a skill: not empty, not hidden, and a single path component.
fn is_skill_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\0'])
}

/// The file that holds skill `name` in `dir`: `<name>.md` when it is a file, else
/// `<name>/SKILL.md` when that is a file, else none.
pub fn skill_file(dir: &Path, name: &str) -> Option<PathBuf> {
    if !is_skill_name(name) {
        return None;
    }
    let flat = dir.join(format!("{name}.md"));
    if flat.is_file() {
        return Some(flat);
    }
    let nested = dir.join(name).join("SKILL.md");
    nested.is_file().then_some(nested)
}

/// The names of the skills in `dir`, sorted; each listed once even when it is both a flat file
/// and a directory. An unreadable directory holds none.
pub fn skill_names(dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    let mut candidates = BTreeSet::new();
    for entry in entries.flatten() {
        let Ok(file_name) = entry.file_name().into_string() else {
            continue;
        };
        if let Some(stem) = file_name.strip_suffix(".md") {
            candidates.insert(stem.to_string());
        }
        candidates.insert(file_name);
    }
    candidates.retain(|name| skill_file(dir, name).is_some());
    candidates
}

/// The start of the file at `path` as text (invalid UTF-8 replaced), enough to describe it.
fn read_head(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    fs::File::open(path)
        .ok()?
        .take(DESCRIBE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A fresh directory under the system's temporary directory, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static COUNT: AtomicUsize = AtomicUsize::new(0);
            let n = COUNT.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir()
                .join(format!("read-skill-test-{}-{tag}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }

        fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
            let path = self.0.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, content).unwrap();
            path
        }

        fn cwd(&self) -> &str {
            self.0.to_str().unwrap()
        }

        fn context(&self) -> Context {
            Context {
                cwd: self.cwd().to_string(),
                dry_run: false,
                max_output: 100_000,
                want_diff: false,
            }
        }

        fn call(&self, name: &str) -> Outcome {
            cordon_kit::run::<ReadSkill>(&json!({ "name": name }).to_string(), &self.context())
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn base_name_keeps_only_the_final_component() {
        assert_eq!(base_name("deploy"), Some("deploy"));
        assert_eq!(base_name("../deploy"), Some("deploy"));
        assert_eq!(base_name("a/b"), Some("b"));
        assert_eq!(base_name("/etc/passwd"), Some("passwd"));
        assert_eq!(base_name("deploy/"), Some("deploy"));
        assert_eq!(base_name("a.b"), Some("a.b"));
        for nothing in ["", "/", ".", "..", "../..", "a/..", "./", "//"] {
            assert_eq!(base_name(nothing), None, "{nothing:?}");
        }
    }

    #[test]
    fn unknown_message_format() {
        let names: BTreeSet<String> = ["b", "a", "c"].map(String::from).into();
        assert_eq!(
            unknown("x", &names),
            "No skill named \"x\". Available skills: a, b, c"
        );
        assert_eq!(
            unknown("../x", &BTreeSet::new()),
            "No skill named \"../x\". Available skills: (none)"
        );
    }

    #[test]
    fn no_skill_no_declaration() {
        let dir = TempDir::new("empty");
        assert!(ReadSkill::declaration(dir.cwd()).is_none());
        dir.write("notes.txt", "not a skill");
        dir.write("sub/README.md", "a directory without SKILL.md");
        dir.write(".hidden.md", "hidden");
        dir.write(".md", "no name");
        assert!(ReadSkill::declaration(dir.cwd()).is_none());
        assert!(ReadSkill::declaration("/nonexistent/read-skill-dir").is_none());
    }

    #[test]
    fn declaration_lists_the_catalogue_sorted_and_once() {
        let dir = TempDir::new("catalogue");
        dir.write("zeta.md", "---\ndescription: Last one.\n---\nbody\n");
        dir.write("alpha/SKILL.md", "# Alpha\n\nFirst paragraph.\n");
        dir.write("both.md", "---\ndescription: \"Flat: preferred\"\n---\n");
        dir.write("both/SKILL.md", "---\ndescription: nested\n---\n");
        dir.write("empty.md", "");
        dir.write("bad.md", b"\xff\xfe bad bytes\n");
        let declaration = ReadSkill::declaration(dir.cwd()).unwrap();
        assert_eq!(declaration.name, "read_skill");
        assert_eq!(
            declaration.description,
            format!(
                "{INTRO}\n alpha — First paragraph.\n bad — \u{fffd}\u{fffd} bad bytes\n \
                 both — Flat: preferred\n empty — (no description)\n zeta — Last one."
            )
        );
        assert!(matches!(declaration.kind, Kind::Read));
        assert_eq!(declaration.display.icon, "📖");
        assert_eq!(declaration.display.key_argument.as_deref(), Some("name"));
        assert!(!declaration.display.preview_output);
        assert_eq!(declaration.counter.key, "skills");
        assert_eq!(declaration.counter.icon, "📖");
        assert_eq!(declaration.counter.singular, "skill");
        assert_eq!(declaration.counter.plural, "skills");
        let schema: serde_json::Value = serde_json::from_str(&declaration.input_schema).unwrap();
        assert_eq!(schema["required"], json!(["name"]));
        assert_eq!(schema["properties"]["name"]["type"], "string");
    }

    #[test]
    fn call_prefers_the_flat_file() {
        let dir = TempDir::new("flat");
        let flat = dir.write("both.md", "flat content\n");
        dir.write("both/SKILL.md", "nested content\n");
        let nested = dir.write("only/SKILL.md", "# Only nested\n");
        let outcome = dir.call("both");
        assert!(!outcome.failed);
        assert_eq!(outcome.output, "flat content\n");
        assert_eq!(outcome.locations.len(), 1);
        assert_eq!(outcome.locations[0].path, flat.to_str().unwrap());
        let outcome = dir.call("only");
        assert!(!outcome.failed);
        assert_eq!(outcome.output, "# Only nested\n");
        assert_eq!(outcome.locations[0].path, nested.to_str().unwrap());
    }

    #[test]
    fn call_uses_only_the_base_name() {
        let root = TempDir::new("traversal");
        root.write("secret.md", "SECRET");
        let dir = root.0.join("skills");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("deploy.md"), "deploy").unwrap();
        let context = Context {
            cwd: dir.to_str().unwrap().to_string(),
            dry_run: false,
            max_output: 1000,
            want_diff: false,
        };
        let call = |name: &str| {
            cordon_kit::run::<ReadSkill>(&json!({ "name": name }).to_string(), &context)
        };
        for given in [
            "../secret",
            "/etc/secret",
            "skills/../secret",
            "..",
            ".",
            "",
            "a/..",
        ] {
            let outcome = call(given);
            assert!(outcome.failed, "{given}");
            assert_eq!(
                outcome.output,
                format!("No skill named \"{given}\". Available skills: deploy")
            );
            assert!(outcome.locations.is_empty());
        }
        let outcome = call("../../whatever/deploy");
        assert!(!outcome.failed);
        assert_eq!(outcome.output, "deploy");
    }

    #[test]
    fn hidden_and_md_suffixed_names_are_unknown() {
        let dir = TempDir::new("hidden");
        dir.write(".hidden.md", "hidden");
        dir.write("deploy.md", "deploy");
        for given in [".hidden", "deploy.md", "DEPLOY"] {
            let outcome = dir.call(given);
            assert!(outcome.failed, "{given}");
            assert!(outcome.output.ends_with("Available skills: deploy"));
        }
    }

    #[test]
    fn non_utf8_skill_fails_clearly() {
        let dir = TempDir::new("utf8");
        let path = dir.write("bad.md", b"\xff\xfe\x00");
        let outcome = dir.call("bad");
        assert!(outcome.failed);
        assert_eq!(
            outcome.output,
            format!(
                "The skill \"bad\" ({}) is not valid UTF-8 text, so it cannot be read.",
                path.display()
            )
        );
    }

    #[test]
    fn a_directory_named_like_a_flat_file_is_not_one() {
        let dir = TempDir::new("dir-md");
        dir.write("odd.md/SKILL.md", "nested in odd.md");
        dir.write("odd/SKILL.md", "nested in odd");
        assert_eq!(
            skill_names(&dir.0).into_iter().collect::<Vec<_>>(),
            ["odd", "odd.md"]
        );
        assert_eq!(dir.call("odd").output, "nested in odd");
    }

    #[test]
    fn invalid_input_is_a_failure_not_a_panic() {
        let dir = TempDir::new("input");
        let outcome = cordon_kit::run::<ReadSkill>("{\"nom\": 1}", &dir.context());
        assert!(outcome.failed);
        assert!(outcome.output.starts_with("invalid input"));
    }
}
