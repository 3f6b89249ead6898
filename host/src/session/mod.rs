//! A conversation's worth of tool calls, with the rules that span calls.
//!
//! The [`Runtime`] runs one call; a [`Session`] adds what an agent needs across calls, for
//! every tool alike: permission for calls that change things ([`Mode`]), the loop detector
//! ([`loops`]), the turn counters ([`counters`]), the terminal display ([`display`]) and the
//! ACP view of each call ([`acp`]).

pub mod acp;
pub mod counters;
pub mod display;
pub mod loops;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{PermissionOption, ToolCall, ToolCallStatus};
use serde_json::Value;

use crate::bindings::Kind;
use crate::output;
use crate::plugin::Tool;
use crate::runtime::{self, Call, CallError, CallOutcome, Runtime, Watch};
use counters::Counters;
use display::TerminalView;
use loops::LoopDetector;

/// The icon of a call to a tool that is not declared.
const UNKNOWN: &str = "❓";

/// How calls that need permission (kinds edit, delete, move, execute) are decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Run them.
    Allow,
    /// Ask the user before each (an "always" answer holds for the rest of the session).
    Ask,
    /// Refuse them all.
    Deny,
}

/// The user's answer to a permission request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
    /// Nobody could be asked (no terminal, a client that cannot ask, a protocol failure):
    /// refused, and the refusal says so rather than that the user refused.
    Unasked,
}

impl Answer {
    /// Parses an ACP permission option id (`allow_once`, …).
    pub fn from_id(id: &str) -> Option<Self> {
        Some(match id {
            "allow_once" => Answer::AllowOnce,
            "allow_always" => Answer::AllowAlways,
            "reject_once" => Answer::RejectOnce,
            "reject_always" => Answer::RejectAlways,
            _ => return None,
        })
    }

    fn allows(self) -> bool {
        matches!(self, Answer::AllowOnce | Answer::AllowAlways)
    }

    fn always(self) -> bool {
        matches!(self, Answer::AllowAlways | Answer::RejectAlways)
    }
}

/// What the user is asked: the call as ACP shows it (with the diff an edit would apply) and
/// the answers on offer.
pub struct PermissionRequest {
    pub tool_call: ToolCall,
    pub options: Vec<PermissionOption>,
    /// The call's terminal header, for a prompt.
    pub header: String,
    /// The key argument whole, to show under the header when the header cuts it (see
    /// [`display::whole_argument`]): a multi-line command is shown in full.
    pub argument: Option<String>,
    /// What the call would do, as the model would read it (an edit's headline and diff) but
    /// escaped for a terminal ([`display::escape`]); empty for a command.
    pub details: String,
}

/// Asks the user for permission: on a terminal, over a protocol, …
pub trait Ask {
    /// The user's answer. An asker that cannot reach the user answers [`Answer::Unasked`].
    fn ask(&mut self, request: &PermissionRequest) -> impl Future<Output = Answer>;
}

/// An [`Ask`] for sessions that never ask ([`Mode::Allow`] and [`Mode::Deny`]); should it be
/// asked anyway, it refuses.
pub struct NoAsk;

impl Ask for NoAsk {
    async fn ask(&mut self, _: &PermissionRequest) -> Answer {
        Answer::Unasked
    }
}

/// A call on its way into the session: its input parsed once, its tool looked up once, and why
/// it cannot run if it cannot.
pub struct Pending<'r> {
    runtime: &'r Runtime,
    id: String,
    name: String,
    /// The tool, when it is declared (shown even when the input is wrong).
    tool: Option<&'r Tool>,
    /// The call, or why it cannot run and its input as given (null when it was not JSON).
    ready: Result<Call<'r>, (CallError, Value)>,
}

impl<'r> Pending<'r> {
    /// Why the call cannot run, if it cannot.
    pub fn error(&self) -> Option<&CallError> {
        self.ready.as_ref().err().map(|(error, _)| error)
    }

    /// The header of the call, to show before it runs (escaped, one line).
    pub fn header(&self) -> String {
        header(self.tool, &self.name, self.input())
    }

    /// The tool's name, as the model gave it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The input, parsed (null when it was not JSON).
    pub fn input(&self) -> &Value {
        match &self.ready {
            Ok(call) => &call.input,
            Err((_, input)) => input,
        }
    }

    /// The call, or the text of the failure that says why it cannot run.
    fn call(&self) -> Result<&Call<'r>, String> {
        self.ready.as_ref().map_err(|(error, _)| error.to_string())
    }

    /// The kind of the call's tool, when it can run.
    pub fn kind(&self) -> Option<Kind> {
        self.ready.as_ref().ok().map(|call| call.tool.kind)
    }

    /// What the user is asked about the call ([`Decision::Ask`]), with exactly what would
    /// change: an edit is first computed without writing. When that dry run fails, there is
    /// nothing to ask about, and its failure is the call's outcome.
    pub async fn question(&self) -> Result<PermissionRequest, CallOutcome> {
        let call = self.call().map_err(CallOutcome::failure)?;
        let (declaration, kind) = (&call.tool.declaration, call.tool.kind);
        let dry = if kind == Kind::Execute {
            None
        } else {
            let dry = self.runtime.run(call, true, Watch::default()).await;
            if dry.failed {
                return Err(dry);
            }
            Some(dry)
        };
        Ok(PermissionRequest {
            tool_call: acp::tool_call(
                &self.id,
                Some(kind),
                &title(Some(call.tool), &declaration.name, &call.input),
                &call.input,
                dry.as_ref(),
                ToolCallStatus::Pending,
            ),
            options: acp::permission_options(),
            header: display::header(declaration, &call.input),
            argument: display::whole_argument(declaration, &call.input),
            details: dry
                .map(|d| display::escape(&d.output).into_owned())
                .unwrap_or_default(),
        })
    }

    /// Runs the call, or fails with why it cannot run. With `hosts` (a session in ask mode,
    /// [`Session::hosts`]) and an allowlist of hosts, a connection that its commands make to a
    /// host off the list is put to the user through `ask` while the call runs. `progress`
    /// counts its commands' output as they print it.
    pub async fn run(
        &self,
        hosts: Option<Hosts>,
        ask: &mut impl Ask,
        progress: Option<crate::sandbox::Progress>,
    ) -> CallOutcome {
        let call = match self.call() {
            Ok(call) => call,
            Err(why) => return CallOutcome::failure(why),
        };
        let mut watch = Watch {
            asker: None,
            progress,
        };
        let asking = matches!(self.runtime.network(), crate::sandbox::Network::Allow(_));
        let Some(hosts) = hosts.filter(|_| asking) else {
            return self.runtime.run(call, false, watch).await;
        };
        // The command's thread waits for the answer; this task asks.
        let (questions, mut asked) = tokio::sync::mpsc::unbounded_channel();
        watch.asker = Some(crate::sandbox::Asker::new(move |host, port| {
            // The command's thread is inside its worker's async runtime: a std channel may
            // block there.
            let (reply, answer) = std::sync::mpsc::sync_channel(1);
            questions.send((host.to_string(), port, reply)).is_ok()
                && answer.recv().unwrap_or(false)
        }));
        let run = self.runtime.run(call, false, watch);
        tokio::pin!(run);
        loop {
            tokio::select! {
                outcome = &mut run => return outcome,
                Some((host, port, reply)) = asked.recv() => {
                    let allowed = allow_host(&self.id, &hosts, &host, port, ask).await;
                    let _ = reply.send(allowed);
                }
            }
        }
    }
}

/// What the session's rules say about a call before it runs ([`Session::decide`]).
pub enum Decision {
    /// It runs: it needs no permission or has it (a call that cannot run fails as it runs).
    Run,
    /// It is refused; the outcome says why.
    Refuse(Box<CallOutcome>),
    /// The user must be asked ([`Pending::question`]), and the answer given to
    /// [`Session::answer`].
    Ask,
}

/// The session's "always" answers about hosts off the allowlist (`host:port` → allowed),
/// shared with the calls that run while others do.
#[derive(Clone, Default)]
pub struct Hosts(Arc<Mutex<HashMap<String, bool>>>);

/// A call that went through the session.
pub struct Finished<'r> {
    /// The call's id in this session (`call_N`).
    pub id: String,
    /// The tool's name, as the model gave it.
    pub name: String,
    /// The input, parsed (null when it was not JSON).
    pub input: Value,
    /// The tool, when it is declared.
    pub tool: Option<&'r Tool>,
    /// What the model sees.
    pub outcome: CallOutcome,
}

impl Finished<'_> {
    /// What a person sees: the header, and the first `preview_lines` lines of the output when
    /// the tool's output is echoed.
    pub fn view(&self, preview_lines: usize) -> TerminalView {
        let preview = self
            .tool
            .is_none_or(|t| t.declaration.display.preview_output);
        TerminalView {
            header: header(self.tool, &self.name, &self.input),
            preview: preview.then(|| display::preview(&self.outcome.output, preview_lines)),
        }
    }

    /// What an ACP client sees.
    pub fn acp(&self) -> ToolCall {
        let status = if self.outcome.failed {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        acp::tool_call(
            &self.id,
            self.tool.map(|t| t.kind),
            &title(self.tool, &self.name, &self.input),
            &self.input,
            Some(&self.outcome),
            status,
        )
    }
}

/// The state that spans calls. It does not hold the runtime: each call names the runtime it
/// runs on, so a front door that must own everything (an MCP server) need not borrow it.
///
/// [`Session::call`] takes a call through every rule in turn. A front door that runs calls
/// concurrently uses the steps: [`Session::prepare`], [`Session::decide`] (then
/// [`Pending::question`] and [`Session::answer`] when the user must be asked),
/// [`Pending::run`], which needs no session, and [`Session::finish`] in completion order.
pub struct Session {
    mode: Mode,
    /// Tool name → the "always" answer given for it.
    always: HashMap<String, bool>,
    hosts: Hosts,
    loops: LoopDetector,
    counters: Counters,
    calls: u64,
}

impl Session {
    /// A new session.
    pub fn new(mode: Mode) -> Self {
        Session {
            mode,
            always: HashMap::new(),
            hosts: Hosts::default(),
            loops: LoopDetector::default(),
            counters: Counters::default(),
            calls: 0,
        }
    }

    /// The next call, of `name` with `input` on `runtime`: its tool found and its input
    /// checked.
    pub fn prepare<'r>(&mut self, runtime: &'r Runtime, name: &str, input: Value) -> Pending<'r> {
        self.pending(runtime, name, Ok(input))
    }

    /// [`Session::prepare`] for an input given as text (`cordon call`); text that is not JSON
    /// is the call's error (unless the tool is unknown, which is the first thing wrong), and
    /// its input null.
    pub fn prepare_text<'r>(
        &mut self,
        runtime: &'r Runtime,
        name: &str,
        input: &str,
    ) -> Pending<'r> {
        self.pending(runtime, name, Runtime::parse(name, input))
    }

    fn pending<'r>(
        &mut self,
        runtime: &'r Runtime,
        name: &str,
        input: Result<Value, CallError>,
    ) -> Pending<'r> {
        let found = runtime.find(name);
        let tool = found.as_ref().ok().map(|&(_, tool)| tool);
        let ready = match (found, input) {
            (Err(unknown), input) => Err((unknown, input.unwrap_or(Value::Null))),
            (Ok(_), Err(unparsed)) => Err((unparsed, Value::Null)),
            (Ok((plugin, tool)), Ok(input)) => match runtime::check(tool, &input) {
                Ok(()) => Ok(Call {
                    plugin,
                    tool,
                    input,
                }),
                Err(invalid) => Err((invalid, input)),
            },
        };
        self.calls += 1;
        Pending {
            runtime,
            tool,
            id: format!("call_{}", self.calls),
            name: name.to_string(),
            ready,
        }
    }

    /// Runs one call through permissions, the plugin, the loop detector and the counters.
    pub async fn call<'r>(&mut self, pending: Pending<'r>, ask: &mut impl Ask) -> Finished<'r> {
        self.call_watched(pending, ask, None).await
    }

    /// [`Session::call`], with `progress` following what the call's commands print.
    pub async fn call_watched<'r>(
        &mut self,
        pending: Pending<'r>,
        ask: &mut impl Ask,
        progress: Option<crate::sandbox::Progress>,
    ) -> Finished<'r> {
        let decision = match self.decide(&pending) {
            Decision::Ask => match pending.question().await {
                Ok(request) => {
                    let answer = ask.ask(&request).await;
                    self.answer(&pending, answer)
                }
                Err(failed) => Decision::Refuse(Box::new(failed)),
            },
            decided => decided,
        };
        let outcome = match decision {
            Decision::Refuse(refusal) => *refusal,
            _ => pending.run(self.hosts(), ask, progress).await,
        };
        self.finish(pending, outcome)
    }

    /// Whether `pending` may run, by the mode and the "always" answers given so far.
    pub fn decide(&self, pending: &Pending) -> Decision {
        let Ok(call) = &pending.ready else {
            return Decision::Run;
        };
        let (name, kind) = (&call.tool.declaration.name, call.tool.kind);
        if !kind.needs_permission() {
            return Decision::Run;
        }
        let answer = match (self.mode, self.always.get(name)) {
            (Mode::Allow, _) | (Mode::Ask, Some(true)) => return Decision::Run,
            (Mode::Ask, None) => return Decision::Ask,
            (Mode::Deny, _) | (Mode::Ask, Some(false)) => Answer::RejectOnce,
        };
        Decision::Refuse(Box::new(CallOutcome::failure(refusal(kind, name, answer))))
    }

    /// Takes the user's `answer` about `pending` (an "always" one holds for the rest of the
    /// session): whether the call runs or is refused (never [`Decision::Ask`]).
    pub fn answer(&mut self, pending: &Pending, answer: Answer) -> Decision {
        let Ok(call) = &pending.ready else {
            return Decision::Run;
        };
        let (name, kind) = (&call.tool.declaration.name, call.tool.kind);
        if answer.always() {
            self.always.insert(name.clone(), answer.allows());
        }
        if answer.allows() {
            Decision::Run
        } else {
            Decision::Refuse(Box::new(CallOutcome::failure(refusal(kind, name, answer))))
        }
    }

    /// The answers about hosts that [`Pending::run`] asks with: in ask mode only.
    pub fn hosts(&self) -> Option<Hosts> {
        (self.mode == Mode::Ask).then(|| self.hosts.clone())
    }

    /// Ends a call with its `outcome`: the loop detector sees it (and may warn in it), and the
    /// turn's counters count it.
    pub fn finish<'r>(&mut self, pending: Pending<'r>, mut outcome: CallOutcome) -> Finished<'r> {
        let Pending {
            id,
            name,
            tool,
            ready,
            ..
        } = pending;
        let input = match ready {
            Ok(call) => call.input,
            Err((_, input)) => input,
        };
        if let Some(warning) = self.loops.observe(&name, &input, &outcome.output) {
            if !outcome.output.is_empty() && !outcome.output.ends_with('\n') {
                outcome.output.push('\n');
            }
            outcome.output.push_str(&warning);
        }
        if let Some(t) = tool {
            self.counters.add(&t.declaration.counter);
        }
        Finished {
            id,
            name,
            input,
            tool,
            outcome,
        }
    }

    /// Ends the turn: the counts as JSON and as a display line, then starts counting afresh.
    pub fn end_turn(&mut self) -> (Value, String) {
        let counters = std::mem::take(&mut self.counters);
        (counters.json(), counters.display())
    }
}

/// Whether a command of the call `id` may reach `host:port`, which its allowlist does not
/// name: the session's "always" answer for it, else the user's.
async fn allow_host(id: &str, hosts: &Hosts, host: &str, port: u16, ask: &mut impl Ask) -> bool {
    let target = format!("{}:{port}", crate::sandbox::egress::bracketed(host));
    if let Some(&allowed) = hosts.0.lock().unwrap().get(&target) {
        return allowed;
    }
    let title = format!("Connect to {target}");
    let request = PermissionRequest {
        tool_call: acp::tool_call(
            &format!("{id}-network"),
            Some(Kind::Fetch),
            &title,
            &serde_json::json!({ "host": host, "port": port }),
            None,
            ToolCallStatus::Pending,
        ),
        options: acp::permission_options(),
        header: display::escape(&format!("🌐 {title}")).into_owned(),
        argument: None,
        details: display::escape(&format!(
            "A command of this call wants to reach {target}, which the allowlist ({}) does \
             not name.",
            crate::sandbox::Setting::Allowlist
        ))
        .into_owned(),
    };
    let answer = ask.ask(&request).await;
    if answer.always() {
        hosts.0.lock().unwrap().insert(target, answer.allows());
    }
    answer.allows()
}

/// The exact text of a refused call: the reference fixes it for commands the user rejected.
fn refusal(kind: Kind, tool: &str, answer: Answer) -> String {
    let nothing = match kind {
        Kind::Edit => "nothing was written",
        _ => "nothing was changed",
    };
    match (answer, kind) {
        (Answer::Unasked, Kind::Execute) => {
            "[command refused: it needs the user's permission, and nobody could be asked]"
                .to_string()
        }
        (Answer::Unasked, _) => format!(
            "[{tool} refused: it needs the user's permission, and nobody could be asked: {nothing}]"
        ),
        (_, Kind::Execute) => "[command rejected by the user]".to_string(),
        _ => format!("[{tool} rejected by the user: {nothing}]"),
    }
}

/// The header of a call: the tool's icon, or [`UNKNOWN`] for a tool that is not declared, then
/// the [`title`].
fn header(tool: Option<&Tool>, name: &str, input: &Value) -> String {
    match tool {
        Some(t) => display::header(&t.declaration, input),
        None => format!("{UNKNOWN} {}", title(None, name, input)),
    }
}

/// The title of a call, for a client's screen: the header without the icon, escaped alike. An
/// unknown name is bad input and can be megabytes long: it is shown as a short prefix.
fn title(tool: Option<&Tool>, name: &str, input: &Value) -> String {
    match tool {
        Some(t) => display::title(&t.declaration, input),
        None => display::escape(&output::quote(name)).into_owned(),
    }
}
