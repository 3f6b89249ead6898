//! The Agent Client Protocol view of a call, with the `agent-client-protocol` crate's types so
//! an ACP agent can forward it unchanged.

use agent_client_protocol::v1::schema::{
    Diff, PermissionOption, PermissionOptionKind, ToolCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolKind,
};
use serde_json::Value;

use crate::bindings::Kind;
use crate::runtime::CallOutcome;

/// A tool call as ACP describes it: kind (none: an unknown tool), title, status, and from the
/// outcome (none: not run yet, e.g. a command awaiting permission) locations and content.
pub fn tool_call(
    id: &str,
    kind: Option<Kind>,
    title: &str,
    input: &Value,
    outcome: Option<&CallOutcome>,
    status: ToolCallStatus,
) -> ToolCall {
    let call = ToolCall::new(id.to_string(), title)
        .kind(kind.map_or(ToolKind::Other, acp_kind))
        .status(status)
        .raw_input(input.clone());
    let Some(outcome) = outcome else {
        return call;
    };
    let locations = outcome
        .locations
        .iter()
        .map(|l| ToolCallLocation::new(&l.path).line(l.line))
        .collect();
    let content = match &outcome.diff {
        Some(d) => ToolCallContent::from(
            Diff::new(&d.path, d.new_text.clone()).old_text(d.old_text.clone()),
        ),
        None => ToolCallContent::from(outcome.output.clone()),
    };
    call.locations(locations).content(vec![content])
}

/// The four answers a permission request offers, as ACP permission options.
pub fn permission_options() -> Vec<PermissionOption> {
    [
        ("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
        (
            "allow_always",
            "Always allow",
            PermissionOptionKind::AllowAlways,
        ),
        ("reject_once", "Reject", PermissionOptionKind::RejectOnce),
        (
            "reject_always",
            "Always reject",
            PermissionOptionKind::RejectAlways,
        ),
    ]
    .into_iter()
    .map(|(id, name, kind)| PermissionOption::new(id.to_string(), name, kind))
    .collect()
}

fn acp_kind(kind: Kind) -> ToolKind {
    match kind {
        Kind::Read => ToolKind::Read,
        Kind::Edit => ToolKind::Edit,
        Kind::Delete => ToolKind::Delete,
        Kind::Move => ToolKind::Move,
        Kind::Search => ToolKind::Search,
        Kind::Execute => ToolKind::Execute,
        Kind::Think => ToolKind::Think,
        Kind::Fetch => ToolKind::Fetch,
        Kind::Other => ToolKind::Other,
    }
}
