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

use agent_client_protocol::v1::schema::{PermissionOption, ToolCall, ToolCallStatus};
use serde_json::Value;

use crate::bindings::Kind;
use crate::output;
use crate::runtime::{Call, Outcome, Runtime};
use counters::Counters;
use display::Display;
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
    /// The user's answer. An asker that cannot reach the user answers [`Answer::RejectOnce`].
    fn ask(&mut self, request: &PermissionRequest) -> impl Future<Output = Answer>;
}

/// An [`Ask`] for sessions that never ask ([`Mode::Allow`] and [`Mode::Deny`]); should it be
/// asked anyway, it refuses.
pub struct NoAsk;

impl Ask for NoAsk {
    async fn ask(&mut self, _: &PermissionRequest) -> Answer {
        Answer::RejectOnce
    }
}

/// Everything about one finished call.
pub struct Report {
    /// What the model sees.
    pub outcome: Outcome,
    /// What a person sees.
    pub display: Display,
    /// What an ACP client sees.
    pub acp: ToolCall,
}

/// The state that spans calls.
pub struct Session<'r> {
    runtime: &'r Runtime,
    mode: Mode,
    preview_lines: usize,
    /// Tool name → the "always" answer given for it.
    always: HashMap<String, bool>,
    loops: LoopDetector,
    counters: Counters,
    calls: u64,
}

impl<'r> Session<'r> {
    /// A new session over `runtime`.
    pub fn new(runtime: &'r Runtime, mode: Mode, preview_lines: usize) -> Self {
        Session {
            runtime,
            mode,
            preview_lines,
            always: HashMap::new(),
            loops: LoopDetector::default(),
            counters: Counters::default(),
            calls: 0,
        }
    }

    /// The header of a call, to show before it runs; none for an unknown tool.
    pub fn header(&self, tool: &str, input: &str) -> Option<String> {
        let (_, t) = self.runtime.tool(tool)?;
        let value = serde_json::from_str(input).unwrap_or(Value::Null);
        Some(display::header(&t.declaration, &value))
    }

    /// Runs one call through permissions, the plugin, the loop detector and the counters.
    pub async fn call(&mut self, tool: &str, input: &str, ask: &mut impl Ask) -> Report {
        self.calls += 1;
        let id = format!("call_{}", self.calls);
        let runtime = self.runtime;
        let value: Value = serde_json::from_str(input).unwrap_or(Value::Null);
        let found = runtime.tool(tool).map(|(_, t)| t);
        let declaration = found.map(|t| &t.declaration);
        // An unknown name is bad input, shown as a short prefix: it can be megabytes long.
        let (header, icon) = match declaration {
            Some(d) => (display::header(d, &value), display::escape(&d.display.icon)),
            None => (
                display::escape(&format!("{UNKNOWN} {}", output::quote(tool))).into_owned(),
                UNKNOWN.into(),
            ),
        };
        // The title is the header without the icon: escaped alike, for a client's screen.
        let title = header
            .strip_prefix(icon.as_ref())
            .unwrap_or(&header)
            .trim_start()
            .to_string();

        let mut outcome = match runtime.prepare(tool, input) {
            Ok(call) => match self.permit(&id, &call, &header, &title, ask).await {
                Ok(()) => runtime.run(&call, false).await,
                Err(refusal) => refusal,
            },
            Err(failure) => Outcome::failure(failure),
        };
        if let Some(warning) = self.loops.observe(tool, &value, &outcome.output) {
            if !outcome.output.is_empty() && !outcome.output.ends_with('\n') {
                outcome.output.push('\n');
            }
            outcome.output.push_str(&warning);
        }
        let status = if outcome.failed {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        let (preview, acp) = match found {
            Some(t) => {
                let d = &t.declaration;
                self.counters.add(&d.counter);
                let preview = d.display.preview_output;
                let acp = acp::tool_call(&id, Some(t.kind), &title, &value, Some(&outcome), status);
                (preview, acp)
            }
            None => (
                true,
                acp::tool_call(&id, None, &title, &value, Some(&outcome), status),
            ),
        };
        let preview = preview.then(|| display::preview(&outcome.output, self.preview_lines));
        Report {
            outcome,
            display: Display { header, preview },
            acp,
        }
    }

    /// Ends the turn: the counts as JSON and as a display line, then starts counting afresh.
    pub fn end_turn(&mut self) -> (Value, String) {
        let counters = std::mem::take(&mut self.counters);
        (counters.json(), counters.display())
    }

    /// Decides whether `call` may run; the error is the outcome of a refusal (or of a dry run
    /// that already failed, so there is nothing to ask about).
    async fn permit(
        &mut self,
        id: &str,
        call: &Call<'_>,
        header: &str,
        title: &str,
        ask: &mut impl Ask,
    ) -> Result<(), Outcome> {
        let (declaration, kind) = (&call.tool.declaration, call.tool.kind);
        if !kind.needs_permission() {
            return Ok(());
        }
        let allowed = match self.mode {
            Mode::Allow => true,
            Mode::Deny => false,
            Mode::Ask => match self.always.get(&declaration.name) {
                Some(&always) => always,
                None => {
                    // Show the user exactly what would change: compute it without writing.
                    let dry = if kind == Kind::Execute {
                        None
                    } else {
                        let dry = self.runtime.run(call, true).await;
                        if dry.failed {
                            return Err(dry);
                        }
                        Some(dry)
                    };
                    let request = PermissionRequest {
                        tool_call: acp::tool_call(
                            id,
                            Some(kind),
                            title,
                            &call.value,
                            dry.as_ref(),
                            ToolCallStatus::Pending,
                        ),
                        options: acp::permission_options(),
                        header: header.to_string(),
                        argument: display::whole_argument(declaration, &call.value),
                        details: dry
                            .map(|d| display::escape(&d.output).into_owned())
                            .unwrap_or_default(),
                    };
                    let answer = ask.ask(&request).await;
                    if answer.always() {
                        self.always
                            .insert(declaration.name.clone(), answer.allows());
                    }
                    answer.allows()
                }
            },
        };
        if allowed {
            Ok(())
        } else {
            Err(Outcome::failure(refusal(kind, &declaration.name)))
        }
    }
}

/// The exact text of a refused call: the reference fixes it for commands.
fn refusal(kind: Kind, tool: &str) -> String {
    match kind {
        Kind::Execute => "[command rejected by the user]".to_string(),
        Kind::Edit => format!("[{tool} rejected by the user: nothing was written]"),
        _ => format!("[{tool} rejected by the user: nothing was changed]"),
    }
}
