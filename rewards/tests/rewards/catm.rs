//! CATM end to end: trajectories and instances in, labels out, with the HTTP
//! judge talking to a stub OpenAI-compatible server on loopback that fails
//! some requests (retries) and records how many requests were in flight
//! (bounded parallelism).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use rewardlab_rewards::catm::http::{HttpJudge, HttpJudgeConfig};
use rewardlab_rewards::catm::judge::{HeuristicJudge, Judge, JudgeRequest, Verdict, judge_all};
use rewardlab_rewards::catm::mine::Trajectory;
use rewardlab_rewards::catm::{CatmOptions, finish, prepare, run};
use rewardlab_rewards::tasks::SwebenchInstance;

#[derive(Default)]
struct Stats {
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Fail this many of the first requests with 503.
    fail_first: AtomicUsize,
}

struct Stub {
    url: String,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Replies NOT_RELEVANT when the user message mentions "dead end", a hedge
/// when it mentions "unsure", RELEVANT otherwise; in chunked encoding every
/// other time, to exercise both body framings.
fn stub_server(fail_first: usize) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let stats = Arc::new(Stats::default());
    stats.fail_first.store(fail_first, Ordering::SeqCst);
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, stop2) = (stats.clone(), stop.clone());
    let thread = std::thread::spawn(move || {
        let mut workers = Vec::new();
        for conn in listener.incoming() {
            if stop2.load(Ordering::SeqCst) {
                break;
            }
            let Ok(conn) = conn else { continue };
            let stats = s2.clone();
            workers.push(std::thread::spawn(move || serve(conn, &stats)));
        }
        for w in workers {
            let _ = w.join();
        }
    });
    Stub { url: format!("http://{addr}/v1"), stats, stop, addr, thread: Some(thread) }
}

fn serve(conn: TcpStream, stats: &Stats) {
    let n = stats.requests.fetch_add(1, Ordering::SeqCst);
    let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let mut reader = BufReader::new(conn.try_clone().expect("clone stream"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("request line");
    assert!(line.starts_with("POST /v1/chat/completions HTTP/1.1"), "{line}");
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line).expect("header");
        if line.trim().is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().expect("length");
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("body");
    let request: serde_json::Value = serde_json::from_slice(&body).expect("JSON body");
    let user = request["messages"][1]["content"].as_str().expect("user message").to_string();
    // Hold the request briefly so concurrent requests overlap.
    std::thread::sleep(Duration::from_millis(15));
    let mut conn = conn;
    let fail = stats.fail_first.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| left.checked_sub(1)).is_ok();
    stats.in_flight.fetch_sub(1, Ordering::SeqCst);
    if fail {
        let _ =
            conn.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy");
        return;
    }
    let verdict = if user.contains("dead end") {
        "NOT_RELEVANT"
    } else if user.contains("unsure") {
        "Hard to say, maybe NOT relevant or relevant"
    } else {
        "RELEVANT"
    };
    let reply = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": verdict}}]}).to_string();
    let response = if n.is_multiple_of(2) {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
            reply.len()
        )
    } else {
        let (a, b) = reply.split_at(reply.len() / 2);
        format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
            a.len(),
            b.len()
        )
    };
    let _ = conn.write_all(response.as_bytes());
}

fn config(url: &str) -> HttpJudgeConfig {
    HttpJudgeConfig {
        timeout: Duration::from_secs(5),
        retries: 3,
        backoff: Duration::from_millis(5),
        ..HttpJudgeConfig::new(url, "judge-model")
    }
}

fn request(reasoning: &str) -> JudgeRequest {
    JudgeRequest {
        instance_id: "i".into(),
        issue: Some("issue".into()),
        path: "a.py".into(),
        reasoning: reasoning.into(),
    }
}

#[test]
fn http_judge_retries_and_applies_the_conservative_rule() {
    let stub = stub_server(2);
    let judge = HttpJudge::new(config(&stub.url)).expect("valid url");
    assert_eq!(judge.judge(&request("this was a dead end")), Ok(Verdict::NotRelevant));
    assert_eq!(stub.stats.requests.load(Ordering::SeqCst), 3, "two 503s, then success");
    assert_eq!(judge.judge(&request("the bug is here")), Ok(Verdict::Relevant));
    assert_eq!(judge.judge(&request("unsure about this one")), Ok(Verdict::Relevant));
}

#[test]
fn http_judge_gives_up_after_its_retries() {
    let stub = stub_server(100);
    let judge = HttpJudge::new(HttpJudgeConfig { retries: 2, ..config(&stub.url) }).expect("valid url");
    let err = judge.judge(&request("x")).expect_err("always 503");
    assert_eq!(err.attempts, 3);
    assert!(err.message.contains("HTTP 503"), "{err}");
    // Nothing listens on a closed port: a connection error after retries.
    let dead = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let judge = HttpJudge::new(HttpJudgeConfig { retries: 1, ..config(&format!("http://{dead}")) }).expect("url");
    assert_eq!(judge.judge(&request("x")).expect_err("refused").attempts, 2);
}

#[test]
fn parallel_judging_is_bounded() {
    let stub = stub_server(0);
    let judge = HttpJudge::new(config(&stub.url)).expect("valid url");
    let requests: Vec<JudgeRequest> =
        (0..24).map(|i| request(if i % 4 == 0 { "dead end" } else { "useful" })).collect();
    let verdicts = judge_all(&judge, &requests, 3, &|| {});
    let max = stub.stats.max_in_flight.load(Ordering::SeqCst);
    assert!(max <= 3, "{max} requests in flight with parallelism 3");
    assert!(max >= 2, "requests should overlap (max in flight {max})");
    let not_relevant = verdicts.iter().filter(|v| **v == Ok(Verdict::NotRelevant)).count();
    assert_eq!(not_relevant, 6);
}

fn view(id: &str, path: &str) -> serde_json::Value {
    serde_json::json!({"id": id, "type": "function", "function": {"name": "str_replace_editor",
        "arguments": serde_json::json!({"command": "view", "path": path}).to_string()}})
}

fn words(n: usize, tail: &str) -> String {
    let mut s: Vec<String> = (0..n).map(|i| format!("w{i}")).collect();
    s.push(tail.to_string());
    s.join(" ")
}

fn trajectory(instance: &str, reads: &[(&str, String)]) -> Trajectory {
    let mut messages = vec![serde_json::json!({"role": "user", "content": "issue"})];
    for (k, (path, reasoning)) in reads.iter().enumerate() {
        let id = format!("c{k}");
        messages.push(serde_json::json!({"role": "assistant", "content": "", "tool_calls": [view(&id, path)]}));
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": "file text"}));
        messages.push(serde_json::json!({"role": "assistant", "content": reasoning}));
    }
    serde_json::from_value(serde_json::json!({"instance_id": instance, "messages": messages})).expect("trajectory")
}

fn instance(id: &str, file: &str) -> SwebenchInstance {
    SwebenchInstance {
        instance_id: id.into(),
        repo: "o/r".into(),
        base_commit: "abc".into(),
        problem_statement: "issue text".into(),
        patch: format!("diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n@@ -1 +1 @@\n-a\n+b\n"),
        expected_spans: None,
    }
}

#[test]
fn pipeline_labels_and_retention() {
    let trajectories = vec![
        trajectory(
            "i1",
            &[
                ("/testbed/pkg/core.py", words(200, "core logic")),
                ("/testbed/pkg/helpers.py", words(40, "helper")),
                ("/testbed/pkg/noise.py", words(60, "a dead end")),
                ("/testbed/pkg/short.py", words(5, "short")),
                ("/testbed/README.md", words(100, "docs")),
            ],
        ),
        // A second trajectory of i1 reads helpers.py at greater length: the longer reasoning wins.
        trajectory("i1", &[("/testbed/pkg/helpers.py", words(120, "helper again"))]),
        trajectory("i2", &[("/testbed/lib/x.py", words(2, "tiny"))]),
        trajectory("unknown", &[("/testbed/a.py", words(50, "x"))]),
    ];
    let instances = vec![instance("i1", "pkg/core.py"), instance("i2", "lib/y.py"), instance("i3", "z.py")];
    let options = CatmOptions::default();
    let stub = stub_server(1);
    let judge = HttpJudge::new(config(&stub.url)).expect("valid url");
    let prepared = prepare(&trajectories, &instances, &options).expect("patches parse");
    assert_eq!(prepared.requests.len(), 3, "core, helpers, noise");
    let verdicts = judge_all(&judge, &prepared.requests, 2, &|| {});
    let (labels, summary) = finish(prepared, verdicts, &options);

    assert_eq!(labels.len(), 2, "instances with a trajectory");
    let l1 = &labels[0];
    assert_eq!(l1.instance_id, "i1");
    assert_eq!(l1.patch_files, vec!["pkg/core.py"]);
    let catm: Vec<(&str, usize)> = l1.catm.iter().map(|f| (f.path.as_str(), f.tokens)).collect();
    assert_eq!(catm, vec![("pkg/core.py", 202), ("pkg/helpers.py", 122)]);
    let mean = l1.catm.iter().map(|f| f.weight).sum::<f64>() / 2.0;
    assert!((mean - 1.0).abs() < 1e-12);
    assert_eq!(l1.files, vec!["pkg/core.py", "pkg/helpers.py"]);
    assert_eq!(labels[1].files, vec!["lib/y.py"]);
    assert!(labels[1].catm.is_empty());

    assert_eq!(summary.trajectories, 4);
    assert_eq!(summary.unknown_instance, 1);
    assert_eq!(summary.instances, 2);
    assert_eq!(summary.mine.dropped_doc, 1);
    assert_eq!(summary.files_mined, 5);
    assert_eq!(summary.too_short, 2);
    assert_eq!(summary.not_relevant, 1);
    assert_eq!(summary.judge_errors, 0);
    assert_eq!(summary.kept, 2);
    assert_eq!(summary.instances_with_catm, 1);
    assert!((summary.file_retention() - 0.4).abs() < 1e-12);
    assert!(summary.render().contains("retention: 40.0% of mined files, 50.0% of instances"), "{}", summary.render());

    // The heuristic judge sees the same dead end.
    let (labels_h, summary_h) = run(&trajectories, &instances, &HeuristicJudge, 4, &options).expect("runs");
    assert_eq!(summary_h.not_relevant, 0, "\"a dead end\" is not one of the heuristic's dismissals");
    assert_eq!(labels_h[0].catm.len(), 3);
}

#[test]
fn labels_round_trip_and_attach_to_tasks() {
    let label = rewardlab_rewards::catm::Label {
        instance_id: "i1".into(),
        patch_files: vec!["a.py".into()],
        catm: vec![
            rewardlab_rewards::catm::LabelFile { path: "a.py".into(), tokens: 90, weight: 1.2 },
            rewardlab_rewards::catm::LabelFile { path: "b.py".into(), tokens: 60, weight: 0.9 },
            rewardlab_rewards::catm::LabelFile { path: "c.py".into(), tokens: 31, weight: 0.1 },
        ],
        files: vec!["a.py".into(), "b.py".into()],
    };
    let text = serde_json::to_string(&label).expect("serialises");
    let back: rewardlab_rewards::catm::Label = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, label);
    let mut task = instance("i1", "a.py").to_task().expect("task");
    label.attach_to(&mut task);
    assert_eq!(task.auxiliary.len(), 2);
    let target = task.target_selection(0.15);
    assert_eq!(target.files, Some(label.files.clone()), "G = patch files + files with w >= 0.15");
    assert_eq!(task.target_selection(f64::INFINITY).files, Some(vec!["a.py".to_string()]));
}
