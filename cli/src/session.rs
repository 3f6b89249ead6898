//! `cordon session`: tool calls as JSON lines on standard input and output.
//!
//! Each line in is one request; each line out answers it, in order, echoing its `id`. A line
//! that is not a request gets an `{"error": …}` line and the session goes on. With
//! `--permissions ask`, a call that needs permission first writes a `permission_request` line
//! and reads the answer line. End of input ends the session.

use rmcp::transport::io::{StdioReader, StdioWriter};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use cordon::Runtime;
use cordon::output::quote;
use cordon::runtime::MAX_INPUT_BYTES;
use cordon::session::{Answer, Ask, Mode, PermissionRequest, Session};

/// Standard input and output, shared by the request loop and the permission prompts.
struct Io {
    input: BufReader<StdioReader>,
    out: StdioWriter,
    /// The `id` of the request being answered.
    id: Option<Value>,
}

/// A line of input without its line ending, or the error answer to a line that is not text.
type Line = Result<String, String>;

impl Io {
    /// The next line of input; `None` at end of input. The line is read as bytes: one that
    /// is not UTF-8 is an error for its answer, not the end of the session.
    async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        let mut bytes = Vec::new();
        if self.input.read_until(b'\n', &mut bytes).await? == 0 {
            return Ok(None);
        }
        if bytes.ends_with(b"\n") {
            bytes.pop();
            if bytes.ends_with(b"\r") {
                bytes.pop();
            }
        }
        Ok(Some(String::from_utf8(bytes).map_err(|e| {
            format!(
                "the line is not UTF-8 text: {}; send each request as one line of JSON in UTF-8",
                e.utf8_error()
            )
        })))
    }

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

impl Ask for Io {
    async fn ask(&mut self, request: &PermissionRequest) -> Answer {
        let message = json!({
            "permission_request": request.tool_call,
            "options": request.options,
        });
        if self.send(message).await.is_err() {
            return Answer::Unasked;
        }
        // Fail closed: anything but a valid answer refuses the call.
        let Ok(Some(line)) = self.next_line().await else {
            return Answer::Unasked;
        };
        let answer = line
            .as_deref()
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
            .and_then(|v| v.get("permission")?.as_str().and_then(Answer::from_id));
        if answer.is_none() {
            let got = line.map_or_else(|not_text| not_text, quote);
            let error = format!(
                "expected {{\"permission\": \"allow_once\"|\"allow_always\"|\"reject_once\"|\"reject_always\"}}, got: {got}; the call is refused"
            );
            let _ = self.send(json!({ "error": error })).await;
        }
        answer.unwrap_or(Answer::RejectOnce)
    }
}

/// Serves requests until end of input.
pub async fn serve(runtime: &Runtime, mode: Mode, preview_lines: usize) -> std::io::Result<()> {
    let mut session = Session::new(mode);
    // When stdin and stdout are pipes (as agents start cordon), they are read and written on
    // the reactor, as `cordon mcp` does, instead of through a blocking thread for every line
    // (see docs/performance.md); anything else falls back to tokio's standard streams.
    let (input, out) = rmcp::transport::io::stdio_pipes();
    let mut io = Io {
        input: BufReader::new(input),
        out,
        id: None,
    };
    while let Some(line) = io.next_line().await? {
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
                io.id = None;
                io.send(json!({ "error": error })).await?;
                continue;
            }
        };
        io.id = request.get("id").cloned();
        let response = match parse(request) {
            Ok(Request::Call { tool, input }) => {
                let pending = session.prepare(runtime, &tool, input);
                let finished = session.call(pending, &mut io).await;
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
                response
            }
            Ok(Request::EndTurn) => {
                let (counters, display) = session.end_turn();
                json!({ "counters": counters, "display": display })
            }
            Err(error) => json!({ "error": error }),
        };
        io.send(response).await?;
    }
    Ok(())
}

enum Request {
    Call { tool: String, input: Value },
    EndTurn,
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
        return Ok(Request::Call { tool: name, input });
    }
    if map.get("end_turn") == Some(&Value::Bool(true)) {
        return Ok(Request::EndTurn);
    }
    Err(
        "expected {\"tool\": NAME, \"input\": {...}} or {\"end_turn\": true}, optionally with an \"id\""
            .to_string(),
    )
}

/// The `sandbox` field of a response: the names of the layers in force, and what holds of the
/// others.
fn receipt(layers: &[cordon::shell::Layer]) -> Value {
    use cordon::shell::Enforcement;
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
