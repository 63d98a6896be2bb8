//! The vocabulary table: what differs between the lines this core serves
//! (v0, SPEC; the published line, docs/PUBLISHED.md) as data the one
//! reader, fold, repair and header check read. A `Log` holds a
//! `&'static Vocabulary`; nothing here is a second copy of a rule.
//!
//! What cannot be data is a named rule a table switches on, written once
//! where it runs: the `tool/result` replacement rule (`surface::tool_result_rewrite`,
//! PUB 6) and the fork rule's forms (`log::fork_end`).

use crate::event::Kind;

/// A reusable seed-check predicate (PUB 4.2, SPEC 3), evaluated over an
/// event's `data` text by `event::holds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Predicate {
    /// `data.header` an object whose `config` has non-empty `provider`, `model`.
    HeaderProviderModel,
    /// `config.reasoningEffort`, when present, a non-empty string.
    HeaderReasoningEffort,
    /// `header.adapterDefaults`, when present: `{reasoningEffort?, maxTokens?}`
    /// markers, each `true`, each naming a present `config` field.
    HeaderAdapterDefaults,
    /// v0: `data.provenance` has non-empty `provider` and `model`.
    ProvenanceProviderModel,
    /// The message is an object with a non-empty string `id`.
    MessageIdentified,
    /// `message.role` is this string.
    MessageRole(&'static str),
    /// `message.source` is an object with a non-empty string `kind`.
    MessageSource,
    /// `message.content` is an array.
    MessageContent,
    /// `source.kind === 'model'` with non-empty `provider` and `model`.
    ModelSource,
    /// `source.kind === 'tool'` with a non-empty string `callId`.
    ToolSource,
    /// `content` is exactly one `tool-result` object block with an array `content`.
    OneToolResult,
    /// That block's `toolCallId` equals `source.callId`.
    ToolCallIdsMatch,
}

/// One check: a predicate and the tail of `<subject> <tail>` when it fails.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    pub predicate: Predicate,
    pub tail: &'static str,
}

/// Where the message-shape predicates find the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageAt {
    Data,
    DataMessage,
}

/// The seed checks of one type, in order (the first failing one wins).
#[derive(Debug, Clone, Copy)]
pub struct SeedRule {
    pub kind: Kind,
    pub message_at: MessageAt,
    pub checks: &'static [Check],
    /// The message-shape checks (`checkMessageShape`, adopt) are these.
    pub message_shape: bool,
}

/// How a header field's value is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldRule {
    /// A number (the scanner accepted it, so finite).
    Finite,
    NonNegativeSafeInteger,
    String,
    /// A string (else the field's message), then an absolute path.
    AbsolutePath,
    /// Exactly this string.
    Exactly(&'static str),
}

/// One header field, checked in table order after `version` and `id`.
#[derive(Debug, Clone, Copy)]
pub struct HeaderField {
    pub name: &'static str,
    pub required: bool,
    pub rule: FieldRule,
    pub message: &'static str,
}

/// The closers' payloads (SPEC 8, PUB 9): where the scan finds call ids,
/// and which result template it writes.
#[derive(Debug, Clone, Copy)]
pub struct Closers {
    /// Path in an `assistant/message`'s data to its content blocks.
    pub calls_at: &'static [&'static str],
    /// Path in a `tool/result`'s data to the call id it settles.
    pub result_call_id_at: &'static [&'static str],
    pub result: ResultTemplate,
}

/// The synthetic `tool/result` a closer writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultTemplate {
    /// `{turn, step, callId, content, isError, error:{InterruptedError, interrupted}}`.
    V0,
    /// PUB 9: a message, two variants by whether a `tool/call` was seen.
    Published,
}

/// The fork boundary rule's form (PUB 12.5, SPEC 12.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkRule {
    /// The boundary event must be a `turn/end`.
    BoundaryIsTurnEnd,
    /// The last `turn/start`/`turn/end` at or before it is not a `turn/start`.
    NotInsideOpenTurn,
}

#[derive(Debug)]
pub struct Vocabulary {
    pub name: &'static str,
    /// The envelope takes `ignorable` (exactly `true`).
    pub ignorable: bool,
    /// A seed `time` may be negative.
    pub negative_time: bool,
    pub surface: &'static [Kind],
    pub seed_rules: &'static [SeedRule],
    /// The legacy `fallback` reason is refused before the seed checks
    /// (v0) or after them (PUB 4.2 step 4).
    pub fallback_before_checks: bool,
    pub header_fields: &'static [HeaderField],
    pub closers: Closers,
    pub fork: ForkRule,
    /// PUB 6's `tool/result` replacement rule applies.
    pub tool_result_rewrite: bool,
    /// The log keeps the text of every event it is given (a seed, a read,
    /// a fork's copy) and gives texts out (`eventsJson`, `payloads`,
    /// `runEnds`, `toJsonl`, a flush, the closers). `false`: it keeps
    /// none, only the payloads in `kept_payloads` (the published line's
    /// events are the JS session's objects; its log only checks them).
    pub keeps_texts: bool,
    /// The kinds whose surface events' payloads the log keeps apart from
    /// the texts, because a rule reads them later (PUB 6: a replaced
    /// `tool/result` node's `data`): a live event's always, a seeded one's
    /// when the log keeps no texts. One home for both.
    pub kept_payloads: &'static [Kind],
}

impl Vocabulary {
    /// `v0` or `published` (the binding's argument; absent is v0).
    pub fn named(name: Option<&str>) -> Option<&'static Vocabulary> {
        match name {
            None | Some("v0") => Some(&V0),
            Some("published") => Some(&PUBLISHED),
            Some(_) => None,
        }
    }

    pub fn is_surface(&self, kind: Kind) -> bool {
        self.surface.contains(&kind)
    }

    pub fn is_surface_type(&self, ty: &str) -> bool {
        self.is_surface(Kind::of(ty))
    }

    /// Whether the log keeps the payload of a surface event of `kind`.
    pub fn keeps_payload(&self, kind: Kind) -> bool {
        self.kept_payloads.contains(&kind)
    }

    /// Whether an event of `kind` is checked by PUB 6's `tool/result`
    /// replacement rule (seeds, folds and live appends ask here).
    pub fn checks_rewrite(&self, kind: Kind) -> bool {
        self.tool_result_rewrite && kind == Kind::ToolResult
    }

    pub fn seed_rule(&self, kind: Kind) -> Option<&'static SeedRule> {
        self.seed_rules.iter().find(|r| r.kind == kind)
    }
}

const fn check(predicate: Predicate, tail: &'static str) -> Check {
    Check { predicate, tail }
}

const fn field(
    name: &'static str,
    required: bool,
    rule: FieldRule,
    message: &'static str,
) -> HeaderField {
    HeaderField {
        name,
        required,
        rule,
        message,
    }
}

const V0_HEADER: [HeaderField; 4] = [
    field(
        "createdAt",
        true,
        FieldRule::Finite,
        "session header createdAt must be a finite number",
    ),
    field(
        "cwd",
        false,
        FieldRule::AbsolutePath,
        "session header cwd must be a string",
    ),
    field(
        "parentSession",
        false,
        FieldRule::String,
        "session header parentSession must be a string",
    ),
    field(
        "seedLength",
        false,
        FieldRule::NonNegativeSafeInteger,
        "session header seedLength must be a non-negative safe integer",
    ),
];

/// The line served today (SPEC).
pub static V0: Vocabulary = Vocabulary {
    name: "v0",
    ignorable: false,
    negative_time: false,
    surface: &[
        Kind::UserMessage,
        Kind::AssistantMessage,
        Kind::ToolResult,
        Kind::ContextMessage,
        Kind::SteeringMessage,
    ],
    seed_rules: &[
        SeedRule {
            kind: Kind::RequestHeader,
            message_at: MessageAt::Data,
            checks: &[check(
                Predicate::HeaderProviderModel,
                "lacks provider/model",
            )],
            message_shape: false,
        },
        SeedRule {
            kind: Kind::AssistantMessage,
            message_at: MessageAt::Data,
            checks: &[check(
                Predicate::ProvenanceProviderModel,
                "lacks provider/model provenance",
            )],
            message_shape: false,
        },
    ],
    fallback_before_checks: true,
    header_fields: &V0_HEADER,
    closers: Closers {
        calls_at: &["content"],
        result_call_id_at: &["callId"],
        result: ResultTemplate::V0,
    },
    fork: ForkRule::BoundaryIsTurnEnd,
    tool_result_rewrite: false,
    keeps_texts: true,
    kept_payloads: &[],
};

const IDENTIFIED: Check = check(Predicate::MessageIdentified, "lacks an identified message");
const SOURCE: Check = check(Predicate::MessageSource, "message has invalid source");
const CONTENT: Check = check(Predicate::MessageContent, "message has invalid content");
const ROLE_USER: Check = check(
    Predicate::MessageRole("user"),
    "message must have role \"user\"",
);

/// The published line (PUB 1, 4.2, 4.4, 6, 9, 12.5).
pub static PUBLISHED: Vocabulary = Vocabulary {
    name: "published",
    ignorable: true,
    negative_time: true,
    surface: &[Kind::UserMessage, Kind::AssistantMessage, Kind::ToolResult],
    seed_rules: &[
        SeedRule {
            kind: Kind::RequestHeader,
            message_at: MessageAt::Data,
            checks: &[
                check(Predicate::HeaderProviderModel, "lacks provider/model"),
                check(
                    Predicate::HeaderReasoningEffort,
                    "has an invalid reasoningEffort",
                ),
                check(
                    Predicate::HeaderAdapterDefaults,
                    "has invalid adapterDefaults",
                ),
            ],
            message_shape: false,
        },
        SeedRule {
            kind: Kind::UserMessage,
            message_at: MessageAt::Data,
            checks: &[IDENTIFIED, ROLE_USER, SOURCE, CONTENT],
            message_shape: true,
        },
        SeedRule {
            kind: Kind::AssistantMessage,
            message_at: MessageAt::DataMessage,
            checks: &[
                IDENTIFIED,
                check(
                    Predicate::MessageRole("assistant"),
                    "message must have role \"assistant\"",
                ),
                SOURCE,
                CONTENT,
                check(Predicate::ModelSource, "message must have model source"),
            ],
            message_shape: true,
        },
        SeedRule {
            kind: Kind::ToolResult,
            message_at: MessageAt::DataMessage,
            checks: &[
                IDENTIFIED,
                ROLE_USER,
                SOURCE,
                CONTENT,
                check(Predicate::ToolSource, "message must have tool source"),
                check(
                    Predicate::OneToolResult,
                    "message must contain one tool-result block",
                ),
                check(
                    Predicate::ToolCallIdsMatch,
                    "message has mismatched tool call ids",
                ),
            ],
            message_shape: true,
        },
    ],
    fallback_before_checks: false,
    header_fields: &[
        field(
            "createdAt",
            true,
            FieldRule::NonNegativeSafeInteger,
            "session header createdAt must be a non-negative safe integer",
        ),
        V0_HEADER[1],
        V0_HEADER[2],
        V0_HEADER[3],
        field(
            "origin",
            false,
            FieldRule::Exactly("subagent"),
            "session header origin must be \"subagent\"",
        ),
        field(
            "delegationDepth",
            false,
            FieldRule::NonNegativeSafeInteger,
            "session header delegationDepth must be a non-negative safe integer",
        ),
        field(
            "agentPreset",
            false,
            FieldRule::String,
            "session header agentPreset must be a string",
        ),
    ],
    closers: Closers {
        calls_at: &["message", "content"],
        result_call_id_at: &["message", "source", "callId"],
        result: ResultTemplate::Published,
    },
    fork: ForkRule::NotInsideOpenTurn,
    tool_result_rewrite: true,
    keeps_texts: false,
    kept_payloads: &[Kind::ToolResult],
};

#[cfg(test)]
mod tests;
