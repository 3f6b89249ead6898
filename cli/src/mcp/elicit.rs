//! Asking the user through MCP elicitation, in `--permissions ask`: a form with the four
//! answers: a request to the client in the 2025-11-25 lifecycle, an `input_required` result
//! in the 2026-07-28 one (the form is the same).

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use serde_json::{Value, json};

use cordon::session::{Answer, Ask, PermissionRequest};

pub(super) fn can_elicit(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// Asks the user through MCP elicitation (a request to the client, 2025-11-25): a form with
/// one field, the answer. Anything but an accepted form with a valid answer refuses the call.
pub(super) struct Elicit {
    pub peer: Peer<RoleServer>,
    /// Whether the client can be asked this way: it declared elicitation, in a protocol
    /// version with requests from server to client.
    pub able: bool,
}

impl Ask for Elicit {
    async fn ask(&mut self, request: &PermissionRequest) -> Answer {
        if !self.able || !can_elicit(&self.peer) {
            tracing::warn!(
                "{}: refused, the MCP client cannot ask the user",
                request.header
            );
            return Answer::Unasked;
        }
        let params = match form(request) {
            Ok(params) => params,
            Err(e) => {
                tracing::error!("cannot build the permission form ({e}); refusing the call");
                return Answer::Unasked;
            }
        };
        match self.peer.create_elicitation(params).await {
            Ok(result) => answer_of(&result),
            Err(e) => {
                tracing::warn!("{}: refused, asking the user failed: {e}", request.header);
                Answer::Unasked
            }
        }
    }
}

/// The answer in the user's reply to the permission form: refused unless accepted with a
/// valid answer.
pub(super) fn answer_of(result: &ElicitResult) -> Answer {
    match result.action {
        ElicitationAction::Accept => result
            .content
            .as_ref()
            .and_then(|c| c.get(ANSWER)?.as_str())
            .and_then(Answer::from_id)
            .unwrap_or(Answer::RejectOnce),
        _ => Answer::RejectOnce,
    }
}

/// The permission form about `request`: what the call would do, and the four answers.
pub(super) fn form(request: &PermissionRequest) -> Result<ElicitRequestParams, String> {
    let mut message = format!("Allow this call?\n{}", request.header);
    if let Some(argument) = &request.argument {
        message.push('\n');
        message.push_str(argument);
    }
    if !request.details.is_empty() {
        message.push_str("\n\n");
        message.push_str(&request.details);
    }
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: answer_schema(request)?,
    })
}

/// The field of the permission form.
pub(super) const ANSWER: &str = "answer";

/// The permission form: one required choice among the request's options (`allow_once`, …),
/// each titled with the option's name.
fn answer_schema(request: &PermissionRequest) -> Result<ElicitationSchema, String> {
    let options = serde_json::to_value(&request.options).map_err(|e| e.to_string())?;
    let choices: Vec<Value> = options
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| Some(json!({"const": o.get("optionId")?, "title": o.get("name")?})))
        .collect();
    let schema = json!({
        "type": "object",
        "properties": {
            ANSWER: {"type": "string", "title": "Permission", "oneOf": choices},
        },
        "required": [ANSWER],
    });
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal");
    };
    ElicitationSchema::from_json_schema(schema).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_permission_form_offers_the_four_answers() {
        let request = PermissionRequest {
            tool_call: agent_client_protocol::v1::schema::ToolCall::new("call_1".to_string(), "x"),
            options: cordon::session::acp::permission_options(),
            header: String::new(),
            argument: None,
            details: String::new(),
        };
        let schema = serde_json::to_value(answer_schema(&request).unwrap()).unwrap();
        let ids: Vec<&str> = schema["properties"][ANSWER]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["const"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            ["allow_once", "allow_always", "reject_once", "reject_always"]
        );
        assert_eq!(schema["required"], json!([ANSWER]));
    }
}
