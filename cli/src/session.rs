//! `cordon session`: tool calls as JSON lines on standard input and output.
//!
//! Each line in is one request; each line out answers it, in order, echoing its `id`. A line
//! that is not a request gets an `{"error": …}` line and the session goes on. With
//! `--permissions ask`, a call that needs permission first writes a `permission_request` line
//! and reads the answer line. While a call runs, `{"cancel": ID}` stops it (its command's
//! whole tree is killed) and answers it with `"status": "cancelled"`; other lines read
//! meanwhile wait their turn. A call with `"stream": true` sends `{"output_lines": […]}` lines
//! (echoing its `id`) with what its commands print while it runs, before its answer. The answer
//! to a call that ran a command carries its `exit` (code, signal, timeout or memory limit) for
//! programs, which cannot tell the text's trailer from output that ends alike. End of input
//! ends the session, once the call running ends.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::transport::io::{StdioReader, StdioWriter};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use cordon::Runtime;
use cordon::layer::{Accept, Op};
use cordon::output::quote;
use cordon::runtime::MAX_INPUT_BYTES;
use cordon::sandbox::Progress;
use cordon::session::display::live;
use cordon::session::{Answer, Ask, Mode, PermissionRequest, Session};

/// How often a call that asked for it sends the lines its commands printed since.
const STREAM_EVERY: Duration = Duration::from_millis(250);

/// The most lines one such message carries: the newest.
const STREAM_LINES: usize = 50;

/// A line of input without its line ending, or the error answer to a line that is not text.
type Line = Result<String, String>;

/// Reads standard input, a line at a time, into `lines` until its end. A line is read as
/// bytes: one that is not UTF-8 is an error for its answer, not the end of the session.
async fn read_lines(mut input: BufReader<StdioReader>, lines: mpsc::Sender<Line>) {
    loop {
        let mut bytes = Vec::new();
        match input.read_until(b'\n', &mut bytes).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if bytes.ends_with(b"\n") {
            bytes.pop();
            if bytes.ends_with(b"\r") {
                bytes.pop();
            }
        }
        let line = String::from_utf8(bytes).map_err(|e| {
            format!(
                "the line is not UTF-8 text: {}; send each request as one line of JSON in UTF-8",
                e.utf8_error()
            )
        });
        if lines.send(line).await.is_err() {
            return;
        }
    }
}

/// Standard output, with the `id` of the request being answered.
struct Out {
    out: StdioWriter,
    id: Option<Value>,
}

impl Out {
    async fn send(&mut self, mut message: Value) -> std::io::Result<()> {
        if let (Some(id), Some(map)) = (&self.id, message.as_object_mut()) {
            map.insert("id".into(), id.clone());
        }
        let mut line = message.to_string();
        line.push('\n');
        self.out.write_all(line.as_bytes()).await?;
        self.out.flush().await
    }
}

/// Asks through the session's loop, which writes the question and reads the answer line
/// while the call runs.
struct Relay {
    questions: mpsc::UnboundedSender<(Value, oneshot::Sender<Answer>)>,
}

impl Ask for Relay {
    async fn ask(&mut self, request: &PermissionRequest) -> Answer {
        let message = json!({
            "permission_request": request.tool_call,
            "options": request.options,
        });
        let (reply, answer) = oneshot::channel();
        if self.questions.send((message, reply)).is_err() {
            return Answer::Unasked;
        }
        answer.await.unwrap_or(Answer::Unasked)
    }
}

/// The answer in `line`, read after a permission request. Anything else refuses the call
/// (fail closed), and gets an error line that says what was expected.
async fn answer(out: &mut Out, line: Line) -> std::io::Result<Answer> {
    let answer = line
        .as_deref()
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|v| v.get("permission")?.as_str().and_then(Answer::from_id));
    if let Some(answer) = answer {
        return Ok(answer);
    }
    let got = line.map_or_else(|not_text| not_text, quote);
    let error = format!(
        "expected {{\"permission\": \"allow_once\"|\"allow_always\"|\"reject_once\"|\"reject_always\"}}, got: {got}; the call is refused"
    );
    out.send(json!({ "error": error })).await?;
    Ok(Answer::RejectOnce)
}

/// Whether `line` cancels the call of request `id`.
fn cancels(line: &Line, id: Option<&Value>) -> bool {
    let cancel = line
        .as_deref()
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|mut v| v.get_mut("cancel").map(Value::take));
    matches!((cancel, id), (Some(cancel), Some(id)) if &cancel == id)
}

/// Serves requests until end of input.
pub async fn serve(runtime: &Runtime, mode: Mode, preview_lines: usize) -> std::io::Result<()> {
    let mut session = Session::new(mode);
    // When stdin and stdout are pipes (as agents start cordon), they are read and written on
    // the reactor, as `cordon mcp` does, instead of through a blocking thread for every line
    // (see docs/performance.md); anything else falls back to tokio's standard streams.
    let (input, out) = rmcp::transport::io::stdio_pipes();
    let (sender, mut lines) = mpsc::channel(16);
    tokio::spawn(read_lines(BufReader::new(input), sender));
    let mut out = Out { out, id: None };
    // Lines read while a call ran, to serve after it.
    let mut waiting: VecDeque<Line> = VecDeque::new();
    loop {
        let line = match waiting.pop_front() {
            Some(line) => line,
            None => match lines.recv().await {
                Some(line) => line,
                None => return Ok(()),
            },
        };
        let parsed = line.and_then(|text| {
            if text.trim().is_empty() {
                return Ok(None);
            }
            // Refused before it is parsed, as an input given as text is.
            if text.len() > MAX_INPUT_BYTES {
                return Err(format!(
                    "the line is {:.1} MiB, more than the {} MiB a request may carry; send less \
                     in one call (a file this large is better produced by a command)",
                    text.len() as f64 / f64::from(1 << 20),
                    MAX_INPUT_BYTES >> 20
                ));
            }
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| format!("the line is not valid JSON: {e}"))
        });
        let request: Value = match parsed {
            Ok(Some(value)) => value,
            Ok(None) => continue,
            Err(error) => {
                out.id = None;
                out.send(json!({ "error": error })).await?;
                continue;
            }
        };
        out.id = request.get("id").cloned();
        let response = match parse(request) {
            Ok(Request::Call {
                tool,
                input,
                stream,
            }) => {
                let pending = session.prepare(runtime, &tool, input);
                let (questions, mut asked) = mpsc::unbounded_channel();
                let mut relay = Relay { questions };
                let progress = stream.then(Progress::default);
                let call = session.call_watched(pending, &mut relay, progress.clone());
                tokio::pin!(call);
                let mut question: Option<oneshot::Sender<Answer>> = None;
                let mut open = true;
                let mut streamed = 0;
                let mut ticks = tokio::time::interval(STREAM_EVERY);
                let finished = loop {
                    tokio::select! {
                        finished = &mut call => break Some(finished),
                        _ = ticks.tick(), if progress.is_some() => {
                            let Some(progress) = &progress else { continue };
                            let (lines, next) = progress.lines_since(streamed);
                            streamed = next;
                            if !lines.is_empty() {
                                let lines = live(&lines, STREAM_LINES);
                                out.send(json!({ "output_lines": lines })).await?;
                            }
                        }
                        Some((message, reply)) = asked.recv() => {
                            out.send(message).await?;
                            // The answer is the next line: one read already (a client that
                            // writes ahead), else the next to come; none at end of input.
                            match waiting.pop_front() {
                                Some(line) if cancels(&line, out.id.as_ref()) => break None,
                                Some(line) => {
                                    let _ = reply.send(answer(&mut out, line).await?);
                                }
                                None if open => question = Some(reply),
                                None => {
                                    let _ = reply.send(Answer::Unasked);
                                }
                            }
                        }
                        line = lines.recv(), if open => match line {
                            // End of input: nobody can answer, and the call ends as it will.
                            None => {
                                open = false;
                                if let Some(reply) = question.take() {
                                    let _ = reply.send(Answer::Unasked);
                                }
                            }
                            Some(line) if cancels(&line, out.id.as_ref()) => break None,
                            Some(line) => match question.take() {
                                Some(reply) => {
                                    let _ = reply.send(answer(&mut out, line).await?);
                                }
                                None => waiting.push_back(line),
                            },
                        },
                    }
                };
                match finished {
                    None => json!({ "status": "cancelled" }),
                    Some(finished) => {
                        let mut response = json!({
                            "status": if finished.outcome.failed { "failed" } else { "completed" },
                            "display": finished.view(preview_lines).plain(),
                            "acp": finished.acp(),
                            "output": finished.outcome.output,
                        });
                        if !finished.outcome.sandbox.is_empty() {
                            let mut sandbox = receipt(&finished.outcome.sandbox);
                            let blocked = finished.outcome.blocked.iter();
                            sandbox["blocked"] = blocked.map(|b| b.target.clone()).collect();
                            response["sandbox"] = sandbox;
                        }
                        if let Some(exit) = finished.outcome.exit.as_ref().and_then(exit) {
                            response["exit"] = exit;
                        }
                        response
                    }
                }
            }
            Ok(Request::EndTurn) => {
                let (counters, display) = session.end_turn();
                let mut response = json!({ "counters": counters, "display": display });
                // Each turn ends in a checkpoint of the layer, to roll back to.
                if runtime.layer().is_some()
                    && let (Value::Object(answer), Some(response)) = (
                        layer(runtime, Op::Checkpoint { label: None }).await,
                        response.as_object_mut(),
                    )
                {
                    response.extend(answer);
                }
                response
            }
            Ok(Request::Layer(op)) => layer(runtime, op).await,
            Ok(Request::Cancel(id)) => json!({
                "error": format!("no call with the id {} is running; nothing was cancelled", quote(&id))
            }),
            Err(error) => json!({ "error": error }),
        };
        out.send(response).await?;
    }
}

enum Request {
    Call {
        tool: String,
        input: Value,
        /// Whether the output lines its commands print are sent while it runs.
        stream: bool,
    },
    EndTurn,
    /// A cancellation that arrived when its call was not running.
    Cancel(Value),
    /// An operation on the session's layer.
    Layer(Op),
}

/// The answer to a layer operation: what it did, as the library serializes it, or why not.
/// An accept takes what the session was started with `--unprotect` too.
async fn layer(runtime: &Runtime, mut op: Op) -> Value {
    let Some(live) = runtime.layer() else {
        return json!({
            "error": "this session has no layer; start it with --layer NAME to use layer operations"
        });
    };
    if let Op::Accept(accept) = &mut op {
        let started = runtime.resolved().shell.unprotect.iter().cloned();
        accept.unprotect.extend(started);
    }
    match live.apply(op).await {
        Ok(done) => serde_json::to_value(done).expect("an answer serializes"),
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// The layer operation of a `{"layer": …}` request.
fn layer_op(map: &serde_json::Map<String, Value>) -> Result<Op, String> {
    let text = |key: &str| -> Result<Option<String>, String> {
        match map.get(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(format!("\"{key}\" must be a string, got: {}", quote(other))),
        }
    };
    let needs = |key: &str, op: &str| -> Result<String, String> {
        text(key)?.ok_or_else(|| format!("{{\"layer\": \"{op}\"}} needs \"{key}\": a string"))
    };
    let paths = |key: &str| -> Result<Vec<PathBuf>, String> {
        let bad = |got: &Value| format!("\"{key}\" must be a list of paths, got: {}", quote(got));
        match map.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(all)) => all
                .iter()
                .map(|p| p.as_str().map(PathBuf::from).ok_or_else(|| bad(p)))
                .collect(),
            Some(other) => Err(bad(other)),
        }
    };
    Ok(match map.get("layer").and_then(Value::as_str) {
        Some("diff") => Op::Diff {
            stat: map.get("stat") == Some(&Value::Bool(true)),
        },
        Some("checkpoint") => Op::Checkpoint {
            label: text("label")?,
        },
        Some("checkpoints") => Op::Checkpoints,
        Some("rollback") => Op::Rollback {
            label: needs("label", "rollback")?,
        },
        Some("fork") => Op::Fork {
            name: needs("name", "fork")?,
        },
        Some("accept") => Op::Accept(Accept {
            paths: paths("paths")?,
            unprotect: paths("unprotect")?,
            allowed: Vec::new(),
        }),
        Some("discard") => Op::Discard,
        _ => {
            return Err(format!(
                "\"layer\" must be \"diff\", \"checkpoint\", \"checkpoints\", \"rollback\", \"fork\", \"accept\" or \"discard\", got: {}",
                quote(&map["layer"])
            ));
        }
    })
}

fn parse(request: Value) -> Result<Request, String> {
    let Value::Object(mut map) = request else {
        return Err(format!("expected a JSON object, got: {}", quote(&request)));
    };
    if let Some(tool) = map.get("tool") {
        let Some(name) = tool.as_str().map(str::to_string) else {
            return Err(format!(
                "\"tool\" must be a string naming a tool, got: {}",
                quote(tool)
            ));
        };
        let input = map.remove("input").unwrap_or_else(|| json!({}));
        let stream = match map.get("stream") {
            None => false,
            Some(Value::Bool(stream)) => *stream,
            Some(other) => {
                return Err(format!(
                    "\"stream\" must be true or false, got: {}",
                    quote(other)
                ));
            }
        };
        return Ok(Request::Call {
            tool: name,
            input,
            stream,
        });
    }
    if map.get("end_turn") == Some(&Value::Bool(true)) {
        return Ok(Request::EndTurn);
    }
    if let Some(id) = map.remove("cancel") {
        return Ok(Request::Cancel(id));
    }
    if map.contains_key("layer") {
        return layer_op(&map).map(Request::Layer);
    }
    Err(
        "expected {\"tool\": NAME, \"input\": {...}} (optionally with \"stream\": true), {\"end_turn\": true}, {\"cancel\": ID} or {\"layer\": OPERATION}, optionally with an \"id\""
            .to_string(),
    )
}

/// The `exit` field of a response: how the command ended, as its trailer tells the model
/// (none for a command that could not run, whose call failed).
fn exit(status: &cordon::sandbox::Status) -> Option<Value> {
    use cordon::sandbox::Status;
    Some(match status {
        Status::Exited(code) => json!({ "code": code }),
        Status::Signaled(signal) => json!({ "signal": signal }),
        Status::TimedOut(secs) => json!({ "timeout": secs }),
        Status::OutOfMemory(mib) => json!({ "memory": mib }),
        Status::Refused(_) | Status::Cancelled | Status::HelperLost(_) => return None,
    })
}

/// The `sandbox` field of a response: the names of the layers in force, and what holds of the
/// others.
fn receipt(layers: &[cordon::sandbox::Layer]) -> Value {
    use cordon::sandbox::Enforcement;
    let names = |wanted: Enforcement| -> Vec<&str> {
        layers
            .iter()
            .filter(|l| l.enforcement == wanted)
            .map(|l| l.name.as_str())
            .collect()
    };
    let details = |wanted: Enforcement| -> serde_json::Map<String, Value> {
        layers
            .iter()
            .filter(|l| l.enforcement == wanted)
            .map(|l| (l.name.clone(), Value::from(l.detail.clone())))
            .collect()
    };
    json!({
        "enforced": names(Enforcement::Enforced),
        "partial": details(Enforcement::Partial),
        "off": details(Enforcement::Off),
    })
}
