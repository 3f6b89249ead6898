//! `cordon mcp`: the tools served to any Model Context Protocol client, over stdio or
//! Streamable HTTP ([`http`]).
//!
//! The server is built on the official Rust SDK (`rmcp`) with hand-written `tools/list` and
//! `tools/call` handlers, since the tool set is whatever the runtime declared. Each MCP
//! connection (the stdio connection, an HTTP session) gets its own [`Server`], with its own
//! [`Session`]: the "always" answers and the loop detector span that connection, exactly as in
//! `cordon session`. What holds across connections is [`Shared`]: the runtime, the bound on
//! calls at once, the lock of calls that change files, and the permission questions handed out.
//!
//! - `tools/list`: every declared tool with its description, input schema, a title and
//!   annotations derived from its kind ([`tools`]); permission questions by elicitation ([`elicit`]).
//! - `tools/call`: an unknown tool is a JSON-RPC error (invalid params), as are arguments that
//!   are not an object (a malformed request). Anything else runs through the session's steps
//!   ([`Server::call`]): input that fails the tool's schema is a tool execution error
//!   (`isError: true`) whose text names the problem, as MCP asks since 2025-11-25 (SEP-1303),
//!   so that the model can correct itself; so is every failed outcome. A completed call is its
//!   output as one text block: a command that ran is one, whatever its exit status (the
//!   plugin does not mark it failed), so a client that retries on `isError` does not run it
//!   again.
//! - Calls run concurrently, up to [`PARALLEL`] in the whole server; the session is locked only
//!   between a call's steps, and calls that change files hold [`Shared::writes`] while they run.
//!   A cancelled call is dropped, which kills its command and stops its plugin.
//! - Permissions: `allow` and `deny` work as everywhere. `ask` asks the user through MCP
//!   elicitation (a form with the four answers): a request to the client in the 2025-11-25
//!   lifecycle, an `input_required` result answered by the retried call in the 2026-07-28 one
//!   (which has no requests from server to client). A client that did not declare elicitation
//!   gets every such call refused, with a text that says nobody could be asked: fail closed.
//! - `ping` is answered in both lifecycles ([`Pinged`] over stdio, [`http`] over HTTP).
//!
//! Over stdio, standard output carries nothing but protocol messages; logs go to standard error.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientNotification, ClientRequest,
    ContentBlock, CustomRequest, CustomResult, ElicitRequest, ErrorCode, Implementation,
    InputRequest, InputRequests, InputRequiredResult, InputResponses, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    ServerCapabilities, ServerConfig, ServerResult, Tool,
};
#[expect(
    deprecated,
    reason = "MCP logging, deprecated by SEP-2577, is what clients show"
)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams};
use rmcp::service::{
    NotificationContext, Peer, RequestContext, RoleServer, ServerInitializeError, Service,
};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::sync::{Mutex, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use cordon::bindings::Kind;
use cordon::output::quote;
use cordon::sandbox::Progress;
use cordon::session::display::live;
use cordon::session::{Answer, Ask, Decision, Hosts, Mode, Pending, PermissionRequest, Session};
use cordon::{CallError, CallOutcome, Runtime};

mod elicit;
mod http;
mod layer;
mod tools;

pub use http::Http;

use elicit::{ANSWER, Elicit, answer_of, can_elicit, form};
use tools::{instructions, tools};

/// Serves the tools: over Streamable HTTP when `http` says so, else one MCP connection on
/// standard input and output, until the client closes it.
/// `layer_tools`: also offer the model the layer's tools ([`layer`]).
pub async fn serve(
    runtime: Runtime,
    mode: Mode,
    http: Option<Http>,
    layer_tools: bool,
) -> anyhow::Result<()> {
    if layer_tools && runtime.layer().is_none() {
        anyhow::bail!(
            "--layer-tools offers the model the tools of the workspace's layer, and there is \
             none: start cordon mcp with --layer NAME too"
        );
    }
    let mut tools = tools(
        &runtime,
        *runtime.network() != cordon::sandbox::Network::Off,
    );
    if layer_tools {
        tools.extend(layer::tools());
    }
    let shared = Arc::new(Shared {
        tools,
        layer_tools,
        instructions: instructions(&runtime, mode),
        mode,
        runtime,
        slots: Semaphore::new(PARALLEL),
        writes: Mutex::new(()),
        asked: Default::default(),
        calls: TaskTracker::new(),
        stopping: CancellationToken::new(),
    });
    match http {
        Some(http) => http::serve(shared, http).await,
        None => serve_stdio(shared).await,
    }
}

async fn serve_stdio(shared: Arc<Shared>) -> anyhow::Result<()> {
    // When stdin and stdout are pipes (as MCP clients launch servers), read and write them on
    // the reactor instead of handing every message to a blocking thread and back: a fifth of
    // a small call's time (see docs/performance.md). Anything else falls back to `stdio()`.
    let service = match Pinged(Server::new(shared))
        .serve(rmcp::transport::stdio_pipes())
        .await
    {
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

/// How many calls run at once in the whole server; more wait for a slot.
const PARALLEL: usize = 8;

/// How often a long call reports progress to a client that asked for it.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How many of the newest lines a command printed since the last progress notification the
/// next one carries.
const LIVE_LINES: usize = 5;

/// The most permission questions 2026-07-28 clients may leave unanswered before the oldest
/// is forgotten (its retry is then asked afresh).
const MAX_QUESTIONS: usize = 64;

/// What every connection's [`Server`] shares.
struct Shared {
    runtime: Runtime,
    mode: Mode,
    /// The tool list, fixed for the life of the runtime.
    tools: Vec<Tool>,
    instructions: String,
    /// At most [`PARALLEL`] calls at once.
    slots: Semaphore,
    /// Held by a call that changes files (kinds edit, delete, move) while it runs: the
    /// workspace is one for every connection.
    writes: Mutex<()>,
    /// Whether the layer's tools are offered (`--layer-tools`).
    layer_tools: bool,
    /// The permission questions handed to 2026-07-28 clients, by the request state that
    /// brings the answer back: the call (tool and input) each is about. Shared, because over
    /// HTTP that lifecycle has no sessions: the retry is a request of its own.
    asked: std::sync::Mutex<BTreeMap<u64, (String, Value)>>,
    /// The calls running, so that shutting down can wait until they are dropped.
    calls: TaskTracker,
    /// Cancelled when the server shuts down: every running call is dropped.
    stopping: CancellationToken,
}

/// The MCP server of one connection (over HTTP: of one session, or of one request of the
/// 2026-07-28 lifecycle, which has no sessions).
struct Server {
    shared: Arc<Shared>,
    /// The rules across the connection's calls, held between a call's steps, never while it
    /// runs: the loop detector and the counters see each call once, in the order they finish.
    session: Mutex<Session>,
    /// The level the client asked log messages at (`logging/setLevel`); none: none are sent.
    #[expect(
        deprecated,
        reason = "MCP logging, deprecated by SEP-2577, is what clients show"
    )]
    log_level: std::sync::Mutex<Option<LoggingLevel>>,
}

impl Server {
    fn new(shared: Arc<Shared>) -> Self {
        Server {
            session: Mutex::new(Session::new(shared.mode)),
            shared,
            log_level: Default::default(),
        }
    }
}

impl ServerHandler for Server {
    #[expect(
        deprecated,
        reason = "MCP logging, deprecated by SEP-2577, is what clients show"
    )]
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_logging()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new("cordon", env!("CARGO_PKG_VERSION"))
                    .with_title("cordon")
                    .with_description(env!("CARGO_PKG_DESCRIPTION")),
            )
            .with_instructions(self.shared.instructions.clone())
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
            self.shared.tools.len(),
            self.shared.runtime.workspace().display()
        );
        if self.shared.mode == Mode::Ask && !can_elicit(&context.peer) {
            tracing::warn!(
                "--permissions ask: this MCP client cannot ask the user (no elicitation), so \
                 every call that needs permission will be refused; use --permissions allow or \
                 deny"
            );
        }
    }

    /// `logging/setLevel`: per-call lines are sent to the client at `info` and below.
    #[expect(
        deprecated,
        reason = "MCP logging, deprecated by SEP-2577, is what clients show"
    )]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.log_level.lock().unwrap() = Some(request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.tools.iter().find(|t| t.name == name).cloned()
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
            (Some(name), Some(arguments)) => self.shared.runtime.validate(name, arguments).err(),
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
        let name = request.name.to_string();
        let shared = &self.shared;
        let call = async {
            let _slot = shared
                .slots
                .acquire()
                .await
                .expect("the call slots are never closed");
            if let Some(live) = shared.runtime.layer()
                && shared.layer_tools
                && layer::is_tool(&request.name)
            {
                let input = Value::Object(request.arguments.unwrap_or_default());
                return Ok(layer::call(live, &request.name, &input).await.into());
            }
            self.call(request, &context).await
        };
        // A cancelled call is dropped where it stands: its command's tree is killed, its
        // plugin stopped at the next epoch tick, and the next call need not wait for it. So
        // is every call when the server shuts down.
        let cancellable = async {
            tokio::select! {
                done = call => done,
                () = context.ct.cancelled() => {
                    tracing::info!("the {name} call was cancelled");
                    Err(ErrorData::internal_error(format!("the {name} call was cancelled"), None))
                }
                () = shared.stopping.cancelled() => Err(ErrorData::internal_error(
                    format!("the {name} call was cancelled: the server is shutting down"),
                    None,
                )),
            }
        };
        shared.calls.track_future(cancellable).await
    }
}

impl Server {
    /// One `tools/call`, through the session's rules: the session is held only between the
    /// steps, so calls of the connection run concurrently ([`PARALLEL`]).
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let input = Value::Object(request.arguments.unwrap_or_default());
        let pending = self
            .session
            .lock()
            .await
            .prepare(&self.shared.runtime, &request.name, input);
        // An unknown tool is a malformed request; any other failure is the call's outcome.
        if let Some(unknown @ CallError::UnknownTool { .. }) = pending.error() {
            return Err(ErrorData::invalid_params(unknown.to_string(), None));
        }
        // The 2026-07-28 protocol has no requests from server to client: the user is asked
        // by returning the question, which the client puts and sends back with the call.
        let rounds = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        let can_elicit = context
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some();
        let mut ask = Elicit {
            peer: context.peer.clone(),
            able: can_elicit && !rounds,
        };
        let decision = self.session.lock().await.decide(&pending);
        let decision = match decision {
            Decision::Ask => {
                let answered = rounds
                    .then(|| {
                        self.answered(&pending, request.input_responses, request.request_state)
                    })
                    .flatten();
                match answered {
                    Some(answer) => self.session.lock().await.answer(&pending, answer),
                    None => match pending.question().await {
                        Ok(question) if rounds && can_elicit => {
                            return self.input_required(&pending, &question);
                        }
                        Ok(question) => {
                            let answer = ask.ask(&question).await;
                            self.session.lock().await.answer(&pending, answer)
                        }
                        Err(failed) => Decision::Refuse(Box::new(failed)),
                    },
                }
            }
            decided => decided,
        };
        let outcome = match decision {
            Decision::Refuse(refusal) => *refusal,
            _ => {
                // Two calls that change files never interleave; commands and reads need not
                // wait for each other.
                let _writing = match pending.kind() {
                    Some(Kind::Edit | Kind::Delete | Kind::Move) => {
                        Some(self.shared.writes.lock().await)
                    }
                    _ => None,
                };
                let hosts = self.session.lock().await.hosts();
                let progress = context.meta.get_progress_token();
                self.run(&pending, hosts, &mut ask, progress, &context.peer)
                    .await
            }
        };
        let header = pending.header();
        let outcome = self.session.lock().await.finish(pending, outcome).outcome;
        let line = format!(
            "{header} ({})",
            if outcome.failed {
                "failed"
            } else {
                "completed"
            }
        );
        tracing::info!("{line}");
        self.log(context, line).await;
        let content = vec![ContentBlock::text(outcome.output)];
        Ok(if outcome.failed {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }

    /// Sends the per-call `line` to the client as an `info` log message, when it asked for
    /// that level or a lower one: with `logging/setLevel` (2025-11-25) or in the request's
    /// `_meta` (2026-07-28). MCP logging is deprecated (SEP-2577), but clients still show it.
    #[expect(
        deprecated,
        reason = "MCP logging, deprecated by SEP-2577, is what clients show"
    )]
    async fn log(&self, context: &RequestContext<RoleServer>, line: String) {
        let level = context.meta.log_level().or(*self.log_level.lock().unwrap());
        if matches!(level, Some(LoggingLevel::Debug | LoggingLevel::Info)) {
            let message = LoggingMessageNotificationParam::new(LoggingLevel::Info, line.into())
                .with_logger("cordon");
            // A client that left is not this call's concern.
            let _ = context.peer.notify_logging_message(message).await;
        }
    }

    /// Runs `pending`; with a progress `token`, a notification each second while it runs:
    /// the seconds so far, the bytes its commands printed, and the newest lines they printed
    /// since the notification before (escaped, each on a line of its own).
    async fn run(
        &self,
        pending: &Pending<'_>,
        hosts: Option<Hosts>,
        ask: &mut Elicit,
        token: Option<ProgressToken>,
        peer: &Peer<RoleServer>,
    ) -> CallOutcome {
        let Some(token) = token else {
            return pending.run(hosts, ask, None).await;
        };
        let progress = Progress::default();
        let run = pending.run(hosts, ask, Some(progress.clone()));
        tokio::pin!(run);
        let started = tokio::time::Instant::now();
        let mut ticks = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
        let mut since = 0;
        loop {
            tokio::select! {
                outcome = &mut run => return outcome,
                _ = ticks.tick() => {
                    let secs = started.elapsed().as_secs_f64();
                    let mut message = format!("{secs:.0} s, {} bytes of output", progress.bytes());
                    let (lines, next) = progress.lines_since(since);
                    since = next;
                    for line in live(&lines, LIVE_LINES) {
                        message.push('\n');
                        message.push_str(&line);
                    }
                    let note = ProgressNotificationParam::new(token.clone(), secs).with_message(message);
                    // A client that left is the cancellation's business, not this loop's.
                    let _ = peer.notify_progress(note).await;
                }
            }
        }
    }

    /// The user's answer about `pending`, when this request is the retry of one whose
    /// question the client was given: its `state` names the question, and the call must be
    /// the same. `None` (ask afresh) for anything else.
    fn answered(
        &self,
        pending: &Pending<'_>,
        responses: Option<InputResponses>,
        state: Option<String>,
    ) -> Option<Answer> {
        let key: u64 = state?.parse().ok()?;
        let (name, input) = self.shared.asked.lock().unwrap().remove(&key)?;
        if name != pending.name() || &input != pending.input() {
            return None;
        }
        // Fail closed: anything but an accepted form with a valid answer refuses the call.
        let response = responses.and_then(|mut r| r.remove(ANSWER));
        Some(response.map_or(Answer::RejectOnce, |r| {
            serde_json::from_value(r).map_or(Answer::RejectOnce, |r| answer_of(&r))
        }))
    }

    /// The question about `pending` as the client's input to give (2026-07-28): the
    /// permission form, and the state that brings the answer back to this call.
    fn input_required(
        &self,
        pending: &Pending<'_>,
        question: &PermissionRequest,
    ) -> Result<CallToolResponse, ErrorData> {
        let params = form(question).map_err(|e| {
            ErrorData::internal_error(format!("cannot build the permission form: {e}"), None)
        })?;
        let key = {
            let mut asked = self.shared.asked.lock().unwrap();
            let key = asked.last_key_value().map_or(0, |(k, _)| k + 1);
            asked.insert(key, (pending.name().to_string(), pending.input().clone()));
            // Questions never answered are forgotten, the oldest first.
            while asked.len() > MAX_QUESTIONS {
                asked.pop_first();
            }
            key
        };
        let requests = InputRequests::from([(
            ANSWER.to_string(),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        )]);
        Ok(InputRequiredResult::new(Some(requests), Some(key.to_string())).into())
    }
}
