//! The domain vocabulary that names everything in a synthetic repository.
//!
//! Identifiers in real code bases are built from a small set of domain words
//! that recur across many files (`request`, `key`, `session`, `batch`...). The
//! generator draws every package, class, function, message and config key from
//! these lists, so that the words of any one issue also occur in many files
//! that are not its targets: that is what makes bag-of-words retrieval
//! imprecise while an exact search for a quoted message stays precise.
//!
//! The lists overlap on purpose (`token` is both an auth and a parser word,
//! `bucket` a cache, storage and metrics word).

/// One functional area of the synthetic project; it becomes a package.
#[derive(Debug)]
pub(crate) struct Domain {
    /// Package directory name (`http`, `cache`...).
    pub package: &'static str,
    /// Human name used in prose ("HTTP client", "cache layer").
    pub title: &'static str,
    /// Nouns that name this domain's things.
    pub nouns: &'static [&'static str],
    /// Verbs that name this domain's operations.
    pub verbs: &'static [&'static str],
}

/// The domains, in package order.
pub(crate) const DOMAINS: &[Domain] = &[
    Domain {
        package: "http",
        title: "HTTP client",
        nouns: &[
            "request",
            "response",
            "header",
            "retry",
            "backoff",
            "timeout",
            "connection",
            "pool",
            "redirect",
            "cookie",
            "proxy",
            "status",
            "body",
            "chunk",
            "url",
            "session",
            "transport",
            "budget",
        ],
        verbs: &["send", "prepare", "follow", "encode", "decode", "retry", "close", "merge"],
    },
    Domain {
        package: "cache",
        title: "cache layer",
        nouns: &[
            "entry",
            "key",
            "value",
            "ttl",
            "eviction",
            "shard",
            "bucket",
            "hit",
            "miss",
            "expiry",
            "namespace",
            "store",
            "capacity",
            "snapshot",
            "session",
            "token",
        ],
        verbs: &["evict", "expire", "lookup", "store", "refresh", "prune", "warm", "invalidate"],
    },
    Domain {
        package: "scheduler",
        title: "job scheduler",
        nouns: &[
            "job",
            "task",
            "worker",
            "queue",
            "cron",
            "interval",
            "deadline",
            "slot",
            "lease",
            "priority",
            "trigger",
            "run",
            "backlog",
            "heartbeat",
            "batch",
            "retry",
        ],
        verbs: &["schedule", "dispatch", "acquire", "release", "cancel", "renew", "drain", "claim"],
    },
    Domain {
        package: "parser",
        title: "parser",
        nouns: &[
            "token",
            "lexer",
            "grammar",
            "node",
            "header",
            "block",
            "field",
            "schema",
            "literal",
            "span",
            "buffer",
            "delimiter",
            "escape",
            "record",
            "line",
        ],
        verbs: &["parse", "tokenize", "scan", "unescape", "split", "consume", "peek", "emit"],
    },
    Domain {
        package: "auth",
        title: "authentication",
        nouns: &[
            "token",
            "credential",
            "scope",
            "grant",
            "signature",
            "nonce",
            "realm",
            "principal",
            "secret",
            "claim",
            "issuer",
            "expiry",
            "key",
            "session",
            "header",
        ],
        verbs: &["sign", "verify", "rotate", "authorize", "revoke", "issue", "refresh", "decode"],
    },
    Domain {
        package: "storage",
        title: "storage backend",
        nouns: &[
            "blob", "bucket", "object", "chunk", "manifest", "volume", "segment", "checksum", "path", "upload", "part",
            "replica", "lock", "key",
        ],
        verbs: &["upload", "download", "replicate", "compact", "checksum", "lock", "write", "read"],
    },
    Domain {
        package: "queue",
        title: "message queue",
        nouns: &[
            "message",
            "topic",
            "partition",
            "offset",
            "consumer",
            "producer",
            "ack",
            "batch",
            "delivery",
            "subscription",
            "backlog",
            "retry",
            "payload",
            "deadline",
        ],
        verbs: &["publish", "consume", "ack", "nack", "commit", "rebalance", "poll", "redeliver"],
    },
    Domain {
        package: "metrics",
        title: "metrics",
        nouns: &[
            "counter",
            "gauge",
            "histogram",
            "sample",
            "label",
            "bucket",
            "series",
            "exporter",
            "registry",
            "window",
            "quantile",
            "rate",
            "timer",
        ],
        verbs: &["record", "observe", "export", "aggregate", "reset", "collect", "increment", "flush"],
    },
    Domain {
        package: "config",
        title: "configuration",
        nouns: &[
            "setting", "option", "profile", "source", "override", "key", "value", "schema", "env", "layer", "default",
            "loader", "section",
        ],
        verbs: &["load", "resolve", "override", "validate", "coerce", "expand", "freeze", "reload"],
    },
    Domain {
        package: "serialization",
        title: "serialization",
        nouns: &[
            "codec", "payload", "encoder", "decoder", "frame", "field", "schema", "version", "envelope", "format",
            "buffer", "record",
        ],
        verbs: &["encode", "decode", "pack", "unpack", "serialize", "migrate", "frame", "validate"],
    },
    Domain {
        package: "routing",
        title: "router",
        nouns: &[
            "route", "path", "pattern", "handler", "endpoint", "segment", "param", "prefix", "match", "rule", "table",
            "request",
        ],
        verbs: &["match", "resolve", "mount", "register", "reverse", "compile", "route", "split"],
    },
    Domain {
        package: "events",
        title: "event bus",
        nouns: &[
            "event",
            "listener",
            "hook",
            "signal",
            "dispatcher",
            "handler",
            "subscriber",
            "payload",
            "channel",
            "emitter",
            "topic",
        ],
        verbs: &["emit", "subscribe", "unsubscribe", "dispatch", "notify", "broadcast", "connect", "fire"],
    },
    Domain {
        package: "db",
        title: "database layer",
        nouns: &[
            "connection",
            "cursor",
            "transaction",
            "query",
            "row",
            "column",
            "migration",
            "index",
            "pool",
            "statement",
            "table",
            "batch",
        ],
        verbs: &["execute", "fetch", "commit", "rollback", "migrate", "prepare", "bind", "vacuum"],
    },
    Domain {
        package: "workflow",
        title: "workflow engine",
        nouns: &[
            "step",
            "stage",
            "pipeline",
            "graph",
            "dependency",
            "state",
            "transition",
            "checkpoint",
            "run",
            "task",
            "deadline",
        ],
        verbs: &["advance", "resume", "checkpoint", "transition", "validate", "plan", "execute", "skip"],
    },
];

/// Verbs every domain uses; mixing them in makes function names collide
/// lexically across packages (`validate_entry`, `validate_header`).
pub(crate) const COMMON_VERBS: &[&str] = &[
    "build",
    "compute",
    "resolve",
    "normalize",
    "validate",
    "apply",
    "load",
    "update",
    "check",
    "ensure",
    "reset",
    "format",
    "get",
    "set",
    "find",
    "iter",
    "merge",
    "parse",
];

/// Class name suffixes by role.
pub(crate) const CLASS_ROLES: &[&str] = &[
    "Policy",
    "Manager",
    "Store",
    "Parser",
    "Builder",
    "Registry",
    "Handler",
    "Pool",
    "Tracker",
    "Resolver",
    "Encoder",
    "Buffer",
    "Validator",
    "Adapter",
    "Controller",
    "Factory",
    "Monitor",
    "Planner",
    "Loader",
    "Queue",
];

/// Adjectives that open error messages.
pub(crate) const MESSAGE_ADJECTIVES: &[&str] = &[
    "invalid",
    "unsupported",
    "unknown",
    "missing",
    "malformed",
    "duplicate",
    "expired",
    "negative",
    "empty",
    "unexpected",
    "stale",
    "conflicting",
    "unterminated",
    "oversized",
];

/// States used in "cannot X while Y is Z" messages and in prose.
pub(crate) const STATES: &[&str] =
    &["closed", "locked", "draining", "paused", "frozen", "exhausted", "detached", "pending"];

/// Attributes that end config keys (`http.retry.max_attempts`).
pub(crate) const CONFIG_ATTRS: &[&str] = &[
    "max_size",
    "timeout",
    "enabled",
    "max_attempts",
    "interval",
    "limit",
    "ttl",
    "strict",
    "backend",
    "mode",
    "batch_size",
    "window",
];

/// Third-party names that issues mention but that never occur in a generated
/// repository (seed 000's `oauth2`: a token from the reporter's environment
/// that a searcher can waste many calls on).
pub(crate) const THIRD_PARTY: &[&str] = &[
    "oauth2",
    "urllib3",
    "boto3",
    "kubernetes",
    "celery",
    "gunicorn",
    "pydantic",
    "sqlalchemy",
    "grpcio",
    "uvloop",
    "msgpack",
    "tenacity",
    "structlog",
    "httpx",
];

/// Project names; the seed picks one.
pub(crate) const PROJECT_NAMES: &[&str] =
    &["relaykit", "tidewater", "lumenflow", "brassica", "quillstack", "ferrule", "marrowgate"];

/// Subpackage names for packages that grow a second level.
pub(crate) const SUBPACKAGES: &[&str] = &["backends", "adapters", "contrib", "internal", "plugins"];

/// Names of people and places used in prose (reporter setups).
pub(crate) const DEPLOYMENTS: &[&str] = &[
    "our staging cluster",
    "a batch importer",
    "the ingestion service",
    "a nightly export job",
    "our API gateway",
    "a CLI tool",
    "the billing worker",
    "a long-running daemon",
];

/// Converts `snake_case` words to `CamelCase`.
pub(crate) fn camel(words: &[&str]) -> String {
    let mut out = String::new();
    for word in words {
        for part in word.split('_') {
            let mut chars = part.chars();
            if let Some(first) = chars.next() {
                out.extend(first.to_uppercase());
                out.push_str(chars.as_str());
            }
        }
    }
    out
}

/// A crude English plural (and third person of a verb), good enough for the
/// vocabulary above.
pub(crate) fn plural(noun: &str) -> String {
    if noun.ends_with('s') || noun.ends_with('x') || noun.ends_with("ch") || noun.ends_with("sh") {
        format!("{noun}es")
    } else if let Some(stem) = noun.strip_suffix('y').filter(|s| !s.ends_with(['a', 'e', 'o'])) {
        format!("{stem}ies")
    } else {
        format!("{noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_joins_snake_words() {
        assert_eq!(camel(&["retry", "policy"]), "RetryPolicy");
        assert_eq!(camel(&["max_size"]), "MaxSize");
    }

    #[test]
    fn plural_handles_common_endings() {
        assert_eq!(plural("entry"), "entries");
        assert_eq!(plural("key"), "keys");
        assert_eq!(plural("match"), "matches");
        assert_eq!(plural("status"), "statuses");
        assert_eq!(plural("refresh"), "refreshes");
    }

    #[test]
    fn third_party_names_never_collide_with_vocabulary() {
        for domain in DOMAINS {
            for word in domain.nouns.iter().chain(domain.verbs) {
                assert!(!THIRD_PARTY.contains(word), "{word} is both vocabulary and third-party");
            }
        }
    }
}
