//! An OpenAI-compatible chat-completions judge over a minimal HTTP/1.1 client.
//!
//! The client is a few dozen lines over `std::net::TcpStream` rather than a
//! crate: one POST with `Connection: close`, a body read to EOF or by
//! `Content-Length`, and chunked responses decoded. It speaks plain `http://`
//! only; for an `https://` judge, run a local TLS-terminating proxy (or an
//! inference server on the same host) and point the URL at it. Requests are
//! retried on connection errors, timeouts, 429 and 5xx with exponential backoff.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{Value, json};

use super::judge::{Judge, JudgeError, JudgeRequest, Verdict, conservative_verdict};

/// How to reach the judge.
#[derive(Clone, Debug)]
pub struct HttpJudgeConfig {
    /// Base URL such as `http://127.0.0.1:8000/v1`; requests go to `{url}/chat/completions`.
    pub url: String,
    /// The model name sent in each request's `model` field.
    pub model: String,
    /// Sent as `Authorization: Bearer ...` when set.
    pub api_key: Option<String>,
    /// The limit on connecting, and on each read and write of one attempt.
    pub timeout: Duration,
    /// Attempts after the first.
    pub retries: usize,
    /// Delay before the first retry; doubled for each further one.
    pub backoff: Duration,
}

impl HttpJudgeConfig {
    /// A config for `model` at `url` with no API key, a 60 s timeout, 3 retries and a
    /// 500 ms first backoff.
    pub fn new(url: &str, model: &str) -> HttpJudgeConfig {
        HttpJudgeConfig {
            url: url.to_string(),
            model: model.to_string(),
            api_key: None,
            timeout: Duration::from_secs(60),
            retries: 3,
            backoff: Duration::from_millis(500),
        }
    }
}

/// A malformed judge URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    #[error("judge URL `{0}` uses https; this client speaks http only (run a local TLS proxy and point the URL at it)")]
    /// The URL (given) uses `https://`, which this client does not speak.
    Https(String),
    #[error("judge URL `{0}` is not `http://host[:port][/path]`")]
    /// The URL (given) is not of the form `http://host[:port][/path]`.
    Shape(String),
}

/// The judge client.
#[derive(Clone, Debug)]
pub struct HttpJudge {
    config: HttpJudgeConfig,
    host: String,
    port: u16,
    path: String,
}

/// The system prompt: the reply format the conservative rule reads.
pub const SYSTEM_PROMPT: &str = "You audit a coding agent's file reads. Given an issue, a file the agent opened, and the \
reasoning the agent wrote right after reading it, decide whether the file was relevant to understanding or fixing \
the issue. Reply with exactly one word: RELEVANT or NOT_RELEVANT.";

impl HttpJudge {
    /// A client for `config`; it checks the URL's shape but connects only when asked to judge.
    pub fn new(config: HttpJudgeConfig) -> Result<HttpJudge, UrlError> {
        let url = config.url.trim_end_matches('/');
        if url.starts_with("https://") {
            return Err(UrlError::Https(config.url.clone()));
        }
        let rest = url.strip_prefix("http://").ok_or_else(|| UrlError::Shape(config.url.clone()))?;
        let (authority, base) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse().map_err(|_| UrlError::Shape(config.url.clone()))?),
            None => (authority, 80),
        };
        if host.is_empty() {
            return Err(UrlError::Shape(config.url.clone()));
        }
        let path = format!("{base}/chat/completions");
        Ok(HttpJudge { host: host.to_string(), port, path, config })
    }

    /// The request body for one file.
    pub fn body(&self, request: &JudgeRequest) -> Value {
        let issue = request.issue.as_deref().unwrap_or("(not given)");
        let user = format!(
            "Issue:\n{issue}\n\nFile: {}\n\nReasoning written after reading the file:\n{}",
            request.path, request.reasoning
        );
        json!({
            "model": self.config.model,
            "temperature": 0,
            "max_tokens": 8,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user},
            ],
        })
    }

    fn attempt(&self, body: &[u8]) -> Result<String, Attempt> {
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| Attempt::Retry(format!("resolving {}: {e}", self.host)))?
            .next()
            .ok_or_else(|| Attempt::Fatal(format!("{} resolves to no address", self.host)))?;
        let io = |e: std::io::Error| Attempt::Retry(format!("{}:{}: {e}", self.host, self.port));
        let mut stream = TcpStream::connect_timeout(&addr, self.config.timeout).map_err(io)?;
        stream.set_read_timeout(Some(self.config.timeout)).map_err(io)?;
        stream.set_write_timeout(Some(self.config.timeout)).map_err(io)?;
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.path,
            self.host,
            self.port,
            body.len()
        );
        if let Some(key) = &self.config.api_key {
            head.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).map_err(io)?;
        stream.write_all(body).map_err(io)?;
        stream.flush().map_err(io)?;
        let (status, body) = read_response(BufReader::new(stream)).map_err(io)?;
        let text = String::from_utf8_lossy(&body).into_owned();
        match status {
            200..=299 => {}
            429 | 500..=599 => {
                return Err(Attempt::Retry(format!("HTTP {status}: {}", snippet(&text))));
            }
            _ => return Err(Attempt::Fatal(format!("HTTP {status}: {}", snippet(&text)))),
        }
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| Attempt::Retry(format!("reply is not JSON ({e}): {}", snippet(&text))))?;
        let content = value
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| Attempt::Retry(format!("reply has no choices[0].message.content: {}", snippet(&text))))?;
        Ok(content.to_string())
    }
}

impl Judge for HttpJudge {
    fn judge(&self, request: &JudgeRequest) -> Result<Verdict, JudgeError> {
        let body = serde_json::to_vec(&self.body(request)).expect("a JSON value serialises");
        let mut delay = self.config.backoff;
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.attempt(&body) {
                Ok(reply) => return Ok(conservative_verdict(&reply)),
                Err(Attempt::Fatal(message)) => return Err(JudgeError { attempts, message }),
                Err(Attempt::Retry(message)) => {
                    if attempts > self.config.retries {
                        return Err(JudgeError { attempts, message });
                    }
                    std::thread::sleep(delay);
                    delay = delay.saturating_mul(2);
                }
            }
        }
    }
}

enum Attempt {
    Retry(String),
    Fatal(String),
}

fn snippet(text: &str) -> String {
    text.chars().take(200).collect()
}

/// Reads a status line, headers and body (by `Content-Length`, chunked, or to EOF).
fn read_response(mut r: impl BufRead) -> std::io::Result<(u16, Vec<u8>)> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(&format!("bad status line `{}`", line.trim_end())))?;
    let mut length: Option<usize> = None;
    let mut chunked = false;
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(bad("connection closed inside the headers"));
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "content-length" {
                length = Some(value.parse().map_err(|_| bad("bad Content-Length"))?);
            } else if name == "transfer-encoding" && value.to_ascii_lowercase().contains("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let size_text = line.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size_text, 16).map_err(|_| bad("bad chunk size"))?;
            if size == 0 {
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            line.clear();
            r.read_line(&mut line)?;
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let j = HttpJudge::new(HttpJudgeConfig::new("http://127.0.0.1:8000/v1/", "m")).expect("valid url");
        assert_eq!((j.host.as_str(), j.port, j.path.as_str()), ("127.0.0.1", 8000, "/v1/chat/completions"));
        let j = HttpJudge::new(HttpJudgeConfig::new("http://judge", "m")).expect("valid url");
        assert_eq!((j.port, j.path.as_str()), (80, "/chat/completions"));
        assert!(matches!(HttpJudge::new(HttpJudgeConfig::new("https://x/v1", "m")), Err(UrlError::Https(_))));
        assert!(matches!(HttpJudge::new(HttpJudgeConfig::new("ftp://x", "m")), Err(UrlError::Shape(_))));
        assert!(matches!(HttpJudge::new(HttpJudgeConfig::new("http://x:port", "m")), Err(UrlError::Shape(_))));
    }

    #[test]
    fn responses_by_length_chunked_and_eof() {
        let by_len = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
        assert_eq!(read_response(by_len.as_bytes()).expect("parses"), (200, b"hello".to_vec()));
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\n\r\n";
        assert_eq!(read_response(chunked.as_bytes()).expect("parses"), (200, b"hello".to_vec()));
        let eof = "HTTP/1.0 503 Busy\r\n\r\nlater";
        assert_eq!(read_response(eof.as_bytes()).expect("parses"), (503, b"later".to_vec()));
        assert!(read_response("garbage\r\n".as_bytes()).is_err());
    }
}
