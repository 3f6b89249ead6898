//! `cordon mcp`: the tools served to any Model Context Protocol client over stdio.
//!
//! The server is built on the official Rust SDK (`rmcp`) with hand-written `tools/list` and
//! `tools/call` handlers, since the tool set is whatever the runtime declared. The stdio
//! transport is one connection, so the process holds one [`Session`]: the "always" answers
//! and the loop detector span the whole connection, exactly as in `cordon session`.
//!
//! - `tools/list`: every declared tool with its description, input schema, a title and
//!   annotations derived from its kind ([`annotations`]).
//! - `tools/call`: an unknown tool is a JSON-RPC error (invalid params), as are arguments that
//!   are not an object (a malformed request). Anything else runs through [`Session::call`]:
//!   input that fails the tool's schema is a tool execution error (`isError: true`) whose text
//!   names the problem, as MCP asks since 2025-11-25 (SEP-1303), so that the model can correct
//!   itself; so is every failed outcome. A completed call is its output as one text block.
//! - Permissions: `allow` and `deny` work as everywhere. `ask` asks the user through MCP
//!   elicitation (a form with the four answers); a client that cannot elicit (it did not
//!   declare the capability, or it speaks a protocol version without server-to-client
//!   requests) gets every such call refused, with a text that says nobody could be asked:
//!   fail closed.
//! - `ping` is answered in both lifecycles ([`Pinged`]).
//!
//! Standard output carries nothing but protocol messages; logs go to standard error.

use std::borrow::Cow;
use std::sync::Arc;

use anyhow::Context as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientNotification, ClientRequest,
    ContentBlock, CustomRequest, CustomResult, ElicitRequestParams, ElicitationAction,
    ElicitationSchema, ErrorCode, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, ServerResult, Tool,
    ToolAnnotations,
};
use rmcp::service::{
    ElicitationMode, NotificationContext, Peer, RequestContext, RoleServer, ServerInitializeError,
    Service,
};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use cordon::bindings::Kind;
use cordon::output::quote;
use cordon::session::{Answer, Ask, Mode, PermissionRequest, Session};
use cordon::{CallError, Options, Runtime};

/// Serves one MCP connection on standard input and output, until the client closes it.
pub async fn serve(runtime: Runtime, options: &Options, mode: Mode) -> anyhow::Result<()> {
    let server = Server {
        tools: tools(&runtime, *runtime.network() != cordon::shell::Network::Off),
        instructions: instructions(&runtime, options, mode),
        mode,
        runtime,
        session: Mutex::new(Session::new(mode)),
    };
    // When stdin and stdout are pipes (as MCP clients launch servers), read and write them on
    // the reactor instead of handing every message to a blocking thread and back: a fifth of
    // a small call's time (see the README, "Performance"). Anything else falls back to `stdio()`.
    let service = match Pinged(server).serve(rmcp::transport::stdio_pipes()).await {
        Ok(service) => service,
        // End of input before the handshake: nothing to serve, as `cordon session` on no input.
        Err(ServerInitializeError::ConnectionClosed(during)) => {
            tracing::debug!("the MCP client left before the handshake ({during})");
            return Ok(());
        }
        Err(e) => return Err(e).context("the MCP connection did not start"),
    };
    let reason = service.waiting().await?;
    tracing::debug!("MCP connection closed: {reason:?}");
    Ok(())
}

/// [`Server`] as the connection's service: rmcp answers `ping` only in the 2025-11-25
/// lifecycle, and "method not found" once a 2026-07-28 session has made its first request;
/// clients ping in both (fastmcp's `client.ping()`), and a server must always answer it.
struct Pinged(Server);

impl Service<RoleServer> for Pinged {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        match request {
            ClientRequest::PingRequest(_) => Ok(ServerResult::empty(())),
            other => self.0.handle_request(other, context).await,
        }
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.0.handle_notification(notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        Service::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Service::supported_protocol_versions(&self.0)
    }
}

/// The MCP server of one connection.
struct Server {
    runtime: Runtime,
    mode: Mode,
    /// The tool list, fixed for the life of the runtime.
    tools: Vec<Tool>,
    instructions: String,
    /// Calls run one at a time, in the order they take the lock, as in `cordon session`.
    session: Mutex<Session>,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("cordon", env!("CARGO_PKG_VERSION"))
                    .with_title("cordon")
                    .with_description(env!("CARGO_PKG_DESCRIPTION")),
            )
            .with_instructions(self.instructions.clone())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let (name, version) = context
            .peer
            .peer_info()
            .map(|info| {
                (
                    info.client_info.name.clone(),
                    info.client_info.version.clone(),
                )
            })
            .unwrap_or_default();
        tracing::info!(
            "MCP client {name} {version} connected; serving {} tool(s) from {}",
            self.tools.len(),
            self.runtime.workspace().display()
        );
        if self.mode == Mode::Ask && !can_elicit(&context.peer) {
            tracing::warn!(
                "--permissions ask: this MCP client cannot ask the user (no elicitation), so \
                 every call that needs permission will be refused; use --permissions allow or \
                 deny"
            );
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    /// What the SDK could not read as a known request. A `tools/call` lands here when its
    /// params are malformed (arguments that are not an object, a name that is not a string):
    /// an invalid-params error that says what is wrong, not the SDK's "method not found".
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method != "tools/call" {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        let params = request.params.unwrap_or(Value::Null);
        let name = params.get("name").and_then(Value::as_str);
        // The runtime's own text: unknown tool, or the input must be a JSON object.
        let refused = match (name, params.get("arguments")) {
            (Some(name), Some(arguments)) => self.runtime.validate(name, arguments).err(),
            _ => None,
        };
        let text = match refused {
            Some(error) => error.to_string(),
            None => format!(
                "Invalid tools/call params: expected {{\"name\": string, \"arguments\": object}}, got: {}",
                quote(&params)
            ),
        };
        Err(ErrorData::invalid_params(text, None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        let input = Value::Object(request.arguments.unwrap_or_default());
        let mut ask = Elicit { peer: context.peer };
        let call = async {
            let mut session = self.session.lock().await;
            let pending = session.prepare(&self.runtime, name, input);
            // An unknown tool is a malformed request; any other failure is the call's outcome.
            if let Some(unknown @ CallError::UnknownTool { .. }) = pending.error() {
                return Err(ErrorData::invalid_params(unknown.to_string(), None));
            }
            let header = pending.header();
            Ok((session.call(pending, &mut ask).await.outcome, header))
        };
        // A cancelled call is no longer waited for, as at its deadline: the calls after it
        // need not wait for a plugin that may be stuck.
        let (outcome, header) = tokio::select! {
            done = call => done?,
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error(format!("the {name} call was cancelled"), None));
            }
        };
        tracing::info!(
            "{header} ({})",
            if outcome.failed {
                "failed"
            } else {
                "completed"
            }
        );
        let content = vec![ContentBlock::text(outcome.output)];
        Ok(if outcome.failed {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}

/// The tool list: each declared tool with a title and the annotations of its kind.
fn tools(runtime: &Runtime, network: bool) -> Vec<Tool> {
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
fn instructions(runtime: &Runtime, options: &Options, mode: Mode) -> String {
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
        options.max_output,
    )
}

fn can_elicit(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// Asks the user through MCP elicitation: a form with one field, the answer. Anything but an
/// accepted form with a valid answer refuses the call.
struct Elicit {
    peer: Peer<RoleServer>,
}

impl Ask for Elicit {
    async fn ask(&mut self, request: &PermissionRequest) -> Answer {
        if !can_elicit(&self.peer) {
            tracing::warn!(
                "{}: refused, the MCP client cannot ask the user",
                request.header
            );
            return Answer::Unasked;
        }
        let schema = match answer_schema(request) {
            Ok(schema) => schema,
            Err(e) => {
                tracing::error!("cannot build the permission form ({e}); refusing the call");
                return Answer::Unasked;
            }
        };
        let mut message = format!("Allow this call?\n{}", request.header);
        if let Some(argument) = &request.argument {
            message.push('\n');
            message.push_str(argument);
        }
        if !request.details.is_empty() {
            message.push_str("\n\n");
            message.push_str(&request.details);
        }
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        };
        match self.peer.create_elicitation(params).await {
            Ok(result) if result.action == ElicitationAction::Accept => result
                .content
                .as_ref()
                .and_then(|c| c.get(ANSWER)?.as_str())
                .and_then(Answer::from_id)
                .unwrap_or(Answer::RejectOnce),
            Ok(_) => Answer::RejectOnce,
            Err(e) => {
                tracing::warn!("{}: refused, asking the user failed: {e}", request.header);
                Answer::Unasked
            }
        }
    }
}

/// The field of the permission form.
const ANSWER: &str = "answer";

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
    fn titles_read_as_words() {
        assert_eq!(title("read_file"), "Read file");
        assert_eq!(title("bash"), "Bash");
        assert_eq!(title(""), "");
    }

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
