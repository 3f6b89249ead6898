//! What `cordon mcp` tells a client about its tools and itself: the tool list with titles and
//! the MCP hints of each tool's kind, and the server's instructions.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};

use cordon::Runtime;
use cordon::bindings::Kind;
use cordon::session::Mode;

/// The tool list: each declared tool with a title and the annotations of its kind.
pub(super) fn tools(runtime: &Runtime, network: bool) -> Vec<Tool> {
    runtime
        .tools()
        .map(|(_, tool)| {
            let d = &tool.declaration;
            // A tool's schema always is an object (`type: object` is checked when it loads).
            let schema: JsonObject = tool.schema.json().as_object().cloned().unwrap_or_default();
            let title = title(&d.name);
            Tool::new(d.name.clone(), d.description.clone(), Arc::new(schema))
                .with_title(title.clone())
                .with_annotations(annotations(tool.kind, title, network))
        })
        .collect()
}

/// `read_file` → `Read file`.
fn title(name: &str) -> String {
    let words = name.replace('_', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => words,
    }
}

/// The MCP hints of a tool of `kind`. Every hint is given explicitly, so a client need not
/// know the spec's defaults. `network`: whether shell commands may use the network.
///
/// | kind                   | readOnly | destructive | openWorld |
/// |------------------------|----------|-------------|-----------|
/// | read, search, think    | true     | —           | false     |
/// | fetch                  | true     | —           | true      |
/// | edit, delete, move     | false    | true        | false     |
/// | execute                | false    | true        | `network` |
/// | other                  | false    | true        | false     |
///
/// Plugins never get the network (see `cordon::grants`), so only commands and fetch tools
/// can reach the open world. `destructiveHint` only means something when `readOnlyHint` is
/// false, so read tools leave it out.
fn annotations(kind: Kind, title: String, network: bool) -> ToolAnnotations {
    let hints = ToolAnnotations::with_title(title);
    match kind {
        Kind::Read | Kind::Search | Kind::Think => hints.read_only(true).open_world(false),
        Kind::Fetch => hints.read_only(true).open_world(true),
        Kind::Edit | Kind::Delete | Kind::Move | Kind::Other => {
            hints.read_only(false).destructive(true).open_world(false)
        }
        Kind::Execute => hints.read_only(false).destructive(true).open_world(network),
    }
}

/// What the client is told about the server when it connects.
pub(super) fn instructions(runtime: &Runtime, mode: Mode) -> String {
    let permissions = match mode {
        Mode::Allow => "Calls that change files or run commands run without asking.",
        Mode::Ask => "Calls that change files or run commands first ask the user.",
        Mode::Deny => "Calls that change files or run commands are refused.",
    };
    format!(
        "cordon runs each tool call confined to the workspace {}: relative paths resolve \
         against it, and nothing outside it can be read or changed. {permissions} A call's \
         output is cut at {} characters, with a notice. The same call giving the same output \
         three times in a row gets a [LOOP_DETECTED: …] warning appended: try something else.",
        runtime.workspace().display(),
        runtime.resolved().max_output,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_read_as_words() {
        assert_eq!(title("read_file"), "Read file");
        assert_eq!(title("bash"), "Bash");
        assert_eq!(title(""), "");
    }
}
