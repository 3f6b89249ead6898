//! `cordon session`: tool calls as JSON lines on standard input and output.
//!
//! Each line in is one request; each line out answers it, in order, echoing its `id`. A line
//! that is not a request gets an `{"error": …}` line and the session goes on. With
//! `--permissions ask`, a call that needs permission first writes a `permission_request` line
//! and reads the answer line. End of input ends the session.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines, Stdin, Stdout};

use cordon::Runtime;
use cordon::session::{Answer, Ask, Mode, PermissionRequest, Session};

/// Standard input and output, shared by the request loop and the permission prompts.
struct Io {
    lines: Lines<BufReader<Stdin>>,
    out: Stdout,
    /// The `id` of the request being answered.
    id: Option<Value>,
}

impl Io {
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
            return Answer::RejectOnce;
        }
        // Fail closed: anything but a valid answer refuses the call.
        let Ok(Some(line)) = self.lines.next_line().await else {
            return Answer::RejectOnce;
        };
        let answer = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| v.get("permission")?.as_str().and_then(Answer::from_id));
        if answer.is_none() {
            let error = format!(
                "expected {{\"permission\": \"allow_once\"|\"allow_always\"|\"reject_once\"|\"reject_always\"}}, got: {line}; the call is refused"
            );
            let _ = self.send(json!({ "error": error })).await;
        }
        answer.unwrap_or(Answer::RejectOnce)
    }
}

/// Serves requests until end of input.
pub async fn serve(runtime: &Runtime, mode: Mode, preview_lines: usize) -> std::io::Result<()> {
    let mut session = Session::new(runtime, mode, preview_lines);
    let mut io = Io {
        lines: BufReader::new(tokio::io::stdin()).lines(),
        out: tokio::io::stdout(),
        id: None,
    };
    while let Some(line) = io.lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let request: Value = match serde_json::from_str(&line) {
            Ok(value) => value,
            Err(e) => {
                io.id = None;
                io.send(json!({ "error": format!("the line is not valid JSON: {e}") }))
                    .await?;
                continue;
            }
        };
        io.id = request.get("id").cloned();
        let response = match parse(&request) {
            Ok(Request::Call { tool, input }) => {
                let report = session.call(&tool, &input, &mut io).await;
                json!({
                    "status": if report.outcome.failed { "failed" } else { "completed" },
                    "output": report.outcome.output,
                    "display": report.display.plain(),
                    "acp": report.acp,
                })
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
    Call { tool: String, input: String },
    EndTurn,
}

fn parse(request: &Value) -> Result<Request, String> {
    let Some(map) = request.as_object() else {
        return Err(format!("expected a JSON object, got: {request}"));
    };
    if let Some(tool) = map.get("tool") {
        let Some(tool) = tool.as_str() else {
            return Err(format!(
                "\"tool\" must be a string naming a tool, got: {tool}"
            ));
        };
        let input = map.get("input").cloned().unwrap_or_else(|| json!({}));
        return Ok(Request::Call {
            tool: tool.to_string(),
            input: input.to_string(),
        });
    }
    if map.get("end_turn") == Some(&Value::Bool(true)) {
        return Ok(Request::EndTurn);
    }
    Err(
        "expected {\"tool\": NAME, \"input\": {...}} or {\"end_turn\": true}, optionally with an \"id\""
            .to_string(),
    )
}
