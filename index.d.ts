/**
 * dsh-session-native: the event-sourced session log of TypeScript agent
 * loops, with a Rust core. A drop-in for `@deepseek-ai/dsh-session` (session
 * format v0): same names, same typed overloads, same error messages.
 *
 * Hand-written: the generated raw binding (`binding.d.ts`) is internal.
 */

// The service's peers are optional: without them these types are `any` and
// the rest of the package still type-checks (no skipLibCheck needed).
// @ts-ignore
import type { Context as CordisContext, Service as CordisService } from '@deepseek-ai/cordis'
// @ts-ignore
import type { Scoped } from '@deepseek-ai/dsh-scope'

// ---------------------------------------------------------------- JSON

/** A value that survives `JSON.stringify` -> `JSON.parse` unchanged. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }

/** True when `value` is lossless JSON (SPEC 2). Never throws for bad data; a throwing getter propagates. */
export declare function isJsonValue(value: unknown): boolean
/** A detached copy of `value`, or `undefined` when it is not lossless JSON (SPEC 2). */
export declare function snapshotJsonValue<T>(value: T): T | undefined

// ---------------------------------------------------------------- identity and header

declare const sessionIdBrand: unique symbol
/** A session identity (a branded string). */
export type SessionId = string & { readonly [sessionIdBrand]: 'SessionId' }
/** Brand a string as a {@link SessionId}. */
export declare function SessionId(id: string): SessionId

/** The only session format version this package reads and writes. */
export declare const SESSION_FORMAT_VERSION: 0

/** Creation metadata of a session; line 1 of a JSONL log (without `type`). */
export interface SessionHeader {
  readonly version: number
  readonly id: SessionId
  readonly createdAt: number
  /** Absolute working directory. */
  readonly cwd?: string
  /** The session this one was forked from. */
  readonly parentSession?: SessionId
  /** How many events the fork copied from the parent. */
  readonly seedLength?: number
}

// ---------------------------------------------------------------- content and messages

export interface TextBlock {
  type: 'text'
  text: string
}
export interface ReasoningBlock {
  type: 'reasoning'
  text: string
}
export interface ToolCallBlock {
  type: 'tool-call'
  id: string
  name: string
  /** Raw argument string as the model streamed it. */
  arguments: string
}
export interface ToolResultBlock {
  type: 'tool-result'
  toolCallId: string
  content: ContentBlock[]
  isError: boolean
}
/** Content block vocabulary, keyed by `type`; merge-extensible by plugins. Unknown block types pass through untouched. */
export interface ContentBlockMap {
  text: TextBlock
  reasoning: ReasoningBlock
  'tool-call': ToolCallBlock
  'tool-result': ToolResultBlock
}
export type ContentBlock = ContentBlockMap[keyof ContentBlockMap]

/** Where a message came from: `{ kind, ... }`. */
export interface MessageSource {
  kind: string
  [key: string]: JsonValue | undefined
}

/** Which model produced an assistant message. */
export interface Provenance {
  provider: string
  model: string
  [key: string]: JsonValue | undefined
}

export interface TokenUsage {
  inputTokens?: number
  outputTokens?: number
  cacheReadTokens?: number
  [key: string]: JsonValue | undefined
}

export interface UserMessage {
  role: 'user'
  content: ContentBlock[]
}
export interface AssistantMessage {
  role: 'assistant'
  content: ContentBlock[]
  provenance: Provenance
}
/** A tool result as the model sees it: a user message with one `tool-result` block. */
export interface ToolResultMessage {
  role: 'user'
  content: [ToolResultBlock]
}
/** One message of the derived LLM history. */
export type Message = UserMessage | AssistantMessage

/** One raw stream chunk (`assistant/chunk`). */
export interface StreamChunk {
  type: string
  [key: string]: JsonValue | undefined
}

// ---------------------------------------------------------------- request headers

export interface LlmCallConfig {
  provider: string
  model: string
  temperature?: number
  maxTokens?: number
  stop?: string[]
  [key: string]: JsonValue | undefined
}
export interface ToolSchema {
  name: string
  description?: string
  parameters?: JsonValue
  [key: string]: JsonValue | undefined
}
/** The request prefix the model sees: config, system prompt, tools, prefix messages. */
export interface EpochHeader {
  config: LlmCallConfig
  system?: string
  tools?: ToolSchema[]
  messagePrefix?: Message[]
}
export type RequestHeaderReason = 'initial' | 'resume' | 'change'

/** Drop an empty `system`, `tools` or `messagePrefix` (SPEC 7). */
export declare function canonicalHeader(header: EpochHeader): EpochHeader
/** Field-wise header equality (SPEC 7). */
export declare function headerEquals(a: EpochHeader, b: EpochHeader): boolean
/** The canonical header of the latest `request/header` in `events`, else `from`. */
export declare function foldRequestHeader(events: readonly SessionEvent[], from?: EpochHeader): EpochHeader | undefined

// ---------------------------------------------------------------- event vocabulary

/** Turn triggers, keyed by `kind`; merge-extensible. */
export interface TurnTriggerMap {
  message: { kind: 'message'; source: MessageSource }
  injection: { kind: 'injection'; source: MessageSource }
}
export type TurnTrigger = TurnTriggerMap[keyof TurnTriggerMap]

/** Why a turn ended, keyed by `kind`; merge-extensible. */
export interface TurnEndReasonMap {
  completed: { kind: 'completed' }
  aborted: { kind: 'aborted'; reason?: JsonValue }
  error: { kind: 'error'; step: number; message: string; code?: string }
  disposed: { kind: 'disposed' }
  'max-tokens': { kind: 'max-tokens' }
  rejected: { kind: 'rejected'; reason: string }
  interrupted: { kind: 'interrupted' }
}
export type TurnEndReason = TurnEndReasonMap[keyof TurnEndReasonMap]

export interface TodoItem {
  content: string
  status: 'pending' | 'in_progress' | 'completed'
}

/**
 * Payload of each event type. An interface so plugins can add types by
 * declaration merging:
 * `declare module 'dsh-session-native' { interface SessionEventMap { 'my/event': {...} } }`.
 */
export interface SessionEventMap {
  'turn/start': { turn: number; trigger: TurnTrigger }
  'turn/end': { turn: number; reason: TurnEndReason }
  'step/start': { turn: number; step: number }
  'step/end': { turn: number; step: number }
  'user/message': { content: ContentBlock[]; source: MessageSource }
  'prompt/blocked': { content: ContentBlock[]; source: MessageSource; reason: JsonValue }
  'context/message': { content: ContentBlock[]; source: MessageSource; envelope?: 'context' | 'raw'; meta?: JsonValue }
  'assistant/chunk': { turn: number; step: number; chunk: StreamChunk }
  'assistant/message': {
    turn: number
    step: number
    content: ContentBlock[]
    provenance: Provenance
    usage?: TokenUsage
  }
  'tool/call': { turn: number; step: number; callId: string; name: string; arguments: string }
  'tool/result': {
    turn: number
    step: number
    callId: string
    content: ContentBlock[]
    isError: boolean
    error?: { name: string; code: string }
    meta?: JsonValue
  }
  'steering/message': { turn: number; content: ContentBlock[]; source: MessageSource }
  'todo/write': { todos: TodoItem[] }
  'request/header': { header: EpochHeader; reason: RequestHeaderReason }
}
export type SessionEventType = keyof SessionEventMap & string

/** The five types that produce model messages and must say how they join the surface. */
export type SurfaceEventType = 'user/message' | 'assistant/message' | 'tool/result' | 'context/message' | 'steering/message'

/** How an event enters the surface: appended, or replacing the nodes `start..end` (inclusive, by position). */
export type SurfaceOp = 'append' | { op: 'replace'; start: number; end: number }

/** The third argument of `append` for surface types. */
export interface SurfaceIntent {
  surfaceOp: SurfaceOp
  /** Earlier events this one derives from; must cover every node a replace shadows. */
  sourceEventSeqs?: number[]
}

/** One logged event. */
export type SessionEvent<T extends SessionEventType = SessionEventType> = {
  [K in T]: {
    type: K
    seq: number
    time: number
    data: SessionEventMap[K]
  } & (K extends SurfaceEventType ? { surfaceOp?: SurfaceOp; sourceEventSeqs?: number[] } : object)
}[T]

// ---------------------------------------------------------------- surface

/** The live surface of a session: one object for the session's life. */
export interface SessionSurface {
  /** Event seqs in model-visible order; one live array, updated in place. */
  readonly nodes: readonly number[]
  /** How many replacements have been committed. */
  readonly replaceGeneration: number
}
export interface SurfaceFoldReplacement {
  seq: number
  start: number
  end: number
  shadowedSeqs: number[]
}
export interface SurfaceFoldResult {
  nodes: number[]
  replacements: SurfaceFoldReplacement[]
}
/** Fold a whole log into its surface and replacement history (SPEC 5). Throws on the first invalid event. */
export declare function foldSurface(events: readonly SessionEvent[]): SurfaceFoldResult
/** Whether `type` may carry `surfaceOp` / `sourceEventSeqs`. */
export declare function isSurfaceEligibleType(type: string): boolean
/** An eligible event that carries a `surfaceOp`. */
export declare function isSurfaceEvent(event: SessionEvent): event is SessionEvent<SurfaceEventType> & { surfaceOp: SurfaceOp }

// ---------------------------------------------------------------- errors

/**
 * The stable `code` of every error this package throws or rejects with
 * (messages are the contract's where SPEC.md quotes them; branch on codes).
 */
export type SessionErrorCode =
  | 'NOT_LOSSLESS_JSON'
  | 'INVALID_EVENT'
  | 'INVALID_HEADER'
  | 'LEGACY_VOCABULARY'
  | 'INVALID_SURFACE'
  | 'SEQ_NOT_CONTIGUOUS'
  | 'REENTRANT_APPEND'
  | 'INVARIANT'
  | 'INVALID_BOUNDARY'
  | 'OPEN_TURN'
  | 'CORRUPT_LOG'
  | 'UNSUPPORTED_VERSION'
  | 'SESSION_NOT_FOUND'
  | 'SESSION_ALREADY_EXISTS'
  | 'SEQ_MISMATCH'
  | 'INVALID_ARGUMENT'
  | 'IO'
  | 'SQLITE'
  | 'STORE_CLOSED'
  | 'SESSION_IN_USE'
  | 'LOG_REPLACED'
  | 'NOT_A_FILE'
  | 'READ_ONLY'
  | 'LEASE_LOST'
  | 'PG_CONNECT'
  | 'PG'
  | 'TOO_LARGE'
  | 'INTERNAL'
  | 'PEER_MISSING'
  | 'PEER_LOAD'
  | 'NATIVE_BINDING_MISSING'
  | 'SESSION_NOT_LIVE'
  | 'SESSION_ALREADY_ATTACHED'
  | 'SESSION_ALREADY_ANNOUNCED'

/**
 * The class of every error this package throws or rejects with, native or
 * not (`err instanceof SessionError`): a stable `code`; `line` (1-based,
 * the header is line 1) when it is about a line of a JSONL log; `errno`
 * when an OS error is behind it. Its `name` is `'Error'`. An argument of
 * the wrong kind gives a `TypeError`, which is also `instanceof
 * SessionError`. `INTERNAL` is a bug of this package, never a made-up value.
 */
export declare class SessionError extends Error {
  constructor(message: string, code: SessionErrorCode, options?: { cause?: unknown })
  readonly code: SessionErrorCode
  readonly line?: number
  readonly errno?: number
}

// ---------------------------------------------------------------- derivation

/** The message one event produces, or `null` (SPEC 6). */
export declare function deriveEventMessage(event: SessionEvent): Message | null
/** The content of a context (or raw) message as the model sees it. */
export declare function renderContextContent(content: readonly ContentBlock[], source: MessageSource, envelope?: 'context' | 'raw'): ContentBlock[]

// ---------------------------------------------------------------- repair and invariants

/** Events that close a turn a crash left open, continuing the log's seqs (SPEC 8). `[]` for a balanced log. */
export declare function interruptedTurnClosers(events: readonly SessionEvent[]): SessionEvent[]
/**
 * The development checks of SPEC 9 over a whole log: throws the first
 * violation (`err.code === 'INVARIANT'`, message `invariant violated: ...`);
 * returns nothing for a valid log.
 */
export declare function checkSessionInvariants(events: readonly SessionEvent[]): void

// ---------------------------------------------------------------- Session

/**
 * The publication seam (SPEC 10): how a store attaches to a session.
 * `beforeCommit` runs after validation and before the event enters the log;
 * throwing vetoes the append (nothing changes). `afterCommit` observers run
 * after commit, each in isolation: a throw or a rejected promise is reported
 * to `onObserverError` (or `console.error`) and neither undoes the append nor
 * stops the other observers. Appending to the same session from inside either
 * callback is rejected.
 */
export interface SessionAttachment {
  beforeCommit?(event: SessionEvent, session: Session): void
  afterCommit?(event: SessionEvent, session: Session): void | Promise<void>
  onObserverError?(error: unknown, event: SessionEvent, session: Session): void
  /**
   * The append was vetoed: a `beforeCommit` threw, this attachment's or a
   * later one's. Called, in attach order, on every attachment the append had
   * reached (up to and including the vetoing one), after the log, surface
   * and `seq` are restored and before `append` rethrows the error; lets an
   * attachment close what its `beforeCommit` opened. A throw here is
   * reported (`console.error`) and does not replace the veto.
   */
  onVeto?(error: unknown, event: SessionEvent, session: Session): void
}

export interface SessionOptions {
  /** Check SPEC 9 invariants over the seed and before every append. */
  invariants?: boolean
}

/** An event-sourced session: an append-only log and its derived message history. */
export declare class Session {
  /**
   * @param id - the session identity.
   * @param seed - events to replay (validated and snapshotted; a failing seed constructs nothing),
   *   or a session whose whole log this one continues as it is (a resume, e.g. of a session a
   *   store opened: no event is checked again, events already frozen are shared).
   * @param header - creation metadata; omitted, `{ version: 0, id, createdAt: Date.now() }`.
   * @param options - `{ invariants: true }` checks SPEC 9 on the seed and every append.
   */
  constructor(id: SessionId | string, seed?: readonly SessionEvent[] | Session, header?: SessionHeader, options?: SessionOptions)

  /** A whole v0 JSONL log (header line + events), parsed and validated natively. Throws with `err.line` on a defective log. */
  static fromJsonl(text: string | Uint8Array): Session

  readonly id: SessionId
  /** Detached, deep-frozen creation metadata. */
  readonly header: SessionHeader
  /** The next seq: the log length. */
  readonly seq: number
  /** A frozen array of frozen events; the same array until the next append. */
  readonly events: readonly SessionEvent[]
  /** The live surface; the same object on every read. */
  readonly surface: SessionSurface

  /**
   * Append one event. Surface types require a {@link SurfaceIntent}; other
   * types forbid it. Returns the frozen logged event, whose `data` is a
   * snapshot of `data`. A rejected append changes nothing.
   */
  append<T extends SessionEventType>(
    type: T,
    data: SessionEventMap[T],
    ...opts: T extends SurfaceEventType ? [opts: SurfaceIntent] : []
  ): SessionEvent<T>

  /** The derived LLM history: a fresh array of shared, deep-frozen messages. */
  deriveMessages(): Message[]
  /** The message one event produces, or `null`. */
  deriveEventMessage(event: SessionEvent): Message | null
  /** The canonical header in force after the last `request/header`, or `undefined`. */
  requestHeader(): EpochHeader | undefined

  /**
   * The exact text a JSONL store would hold for this session. A log longer
   * than a JavaScript string can hold (about 512 MiB) throws `TOO_LARGE`:
   * use {@link Session.writeJsonl}.
   */
  toJsonl(): string
  /**
   * Write what `toJsonl()` gives (the events at the call) to the file at
   * `path`, made or truncated, for a log of any size, off the event loop.
   * Resolves to the bytes written.
   */
  writeJsonl(path: string): Promise<number>
  /**
   * A new session holding events `0..=boundary` (default: the whole log),
   * which must end on a `turn/end`. The child header records
   * `parentSession`, `seedLength` and the parent's `cwd`.
   */
  fork(boundary?: number, childId?: SessionId | string): Session

  /** Attach a store or observer (SPEC 10). Returns the detach function. */
  attach(attachment: SessionAttachment): () => void
}

// ---------------------------------------------------------------- persistence (SPEC 11)

/** Where a store keeps one session's log, when it keeps one artifact per session. */
export interface SessionLocation {
  kind: 'jsonl'
  /** Absolute path of the session's `.jsonl` file (it may not exist yet). */
  path: string
}

/** A stored session as `load` returns it: the header and the balanced, repaired events. */
export interface StoredSession {
  meta: SessionHeader
  events: SessionEvent[]
}

/** How `load` and `open` read a stored session. */
export interface StoreLoadOptions {
  /**
   * Load as the session's writer: take its write lease (rejecting with
   * `SESSION_IN_USE` at once when another store, in any process, holds it)
   * and keep it until `close()`. Default false: a reader, which takes no
   * lease and keeps none.
   */
  write?: boolean
}

/**
 * A durable session store (SPEC 11). Named `SessionStore` before the Cordis
 * service of SPEC 12 took that name (a class and an interface of one name
 * would merge), so no alias is kept. Every method that touches storage runs off the
 * main thread and returns a promise; operations on one session run in call
 * order, different sessions proceed in parallel. Rejections carry `err.code`.
 */
export interface DurableSessionStore {
  /**
   * Record the intent to create a session: nothing is stored until its first
   * append (a never-appended session is absent from `list()`). Rejects an id
   * the store already tracks (`SESSION_ALREADY_EXISTS`, `session "ID" already
   * exists in this backend`) or that has a stored log (`session "ID" already
   * has a persisted log on disk; load/resume it instead of creating`).
   */
  create(header: SessionHeader): Promise<void>
  /**
   * Append one batch, atomically and durably (resolves once durable).
   * `events[0].seq` must continue the stored log (`SEQ_MISMATCH`); the batch
   * must be lossless JSON (`NOT_LOSSLESS_JSON`) without legacy vocabulary
   * (`LEGACY_VOCABULARY`) and keep the SPEC 5 surface rules against the
   * stored surface (`INVALID_SURFACE`). The first append of a created session stores its
   * header with the batch; appending to an id the store has not seen loads
   * (and repairs) its stored log first. The store takes the session's write
   * lease: `SESSION_IN_USE` while another store (any process) holds it;
   * `LOG_REPLACED` when a JSONL log was replaced or removed under the store;
   * `NOT_A_FILE` when its path holds a FIFO, a directory or another
   * non-file; `READ_ONLY` for a SQLite database this process cannot write.
   */
  append(id: SessionId | string, events: readonly SessionEvent[]): Promise<void>
  /**
   * The stored session, repaired for a crash (SPEC 11): complete events of
   * an interrupted turn are kept, a torn tail after the last `turn/end` is
   * dropped, the section-8 closers are appended, and the repair is durable
   * before the promise resolves when the store holds the session's write
   * lease or can take it for that step alone; while another store holds
   * it, the repair is in the result only and nothing is written. A reader
   * (the default) keeps no lease, so it never holds up the session's
   * writer; `{ write: true }` loads as the writer (see `StoreLoadOptions`).
   * Corruption before the last `turn/end` rejects (`CORRUPT_LOG`) and
   * leaves storage unchanged.
   */
  load(id: SessionId | string, options?: StoreLoadOptions): Promise<StoredSession>
  /**
   * `load`, straight into a `Session` (events are parsed into JS objects
   * only when read). Opened `{ write: true }`, the store knows the session
   * holds the stored log, so its first `flush` writes only what was
   * appended; a reader's session is compared with storage on its first flush.
   */
  open(id: SessionId | string, options?: StoreLoadOptions): Promise<Session>
  /**
   * Persist every event of `session` the store does not hold yet, as one
   * durable batch; the log is created on first use. Resolves to how many
   * events were written (0 when there was nothing new). Rejects
   * (`SESSION_ALREADY_EXISTS`) when the stored log under the session's id is
   * not this session's history.
   */
  flush(session: Session): Promise<number>
  /** Headers of every stored session (reads headers only), ordered by `createdAt`, then id. */
  list(): Promise<SessionHeader[]>
  /** Where the log of `header` lives, or `undefined` when the store has no per-session artifact. */
  locate(header: SessionHeader): SessionLocation | undefined
  /** Wait for the operations in flight, then release files and write leases; later calls reject (`STORE_CLOSED`). */
  close(): Promise<void>
}

export interface JsonlSessionStoreOptions {
  /** Directory holding `cwd-<hash>/` and `_no-cwd/` buckets of `<encoded id>.jsonl` files. */
  root: string
}

/** Sessions as JSONL files: line 1 the header, then one event per line. */
/**
 * What the three stores share (their common base at runtime, not exported):
 * the methods of `DurableSessionStore` but `locate`, documented there.
 */
declare abstract class StoreMethods {
  create(header: SessionHeader): Promise<void>
  append(id: SessionId | string, events: readonly SessionEvent[]): Promise<void>
  load(id: SessionId | string, options?: StoreLoadOptions): Promise<StoredSession>
  open(id: SessionId | string, options?: StoreLoadOptions): Promise<Session>
  flush(session: Session): Promise<number>
  list(): Promise<SessionHeader[]>
  close(): Promise<void>
}

export declare class JsonlSessionStore extends StoreMethods implements DurableSessionStore {
  constructor(options: JsonlSessionStoreOptions)
  locate(header: SessionHeader): SessionLocation
}

export type SqliteJournalMode = 'wal' | 'delete' | 'truncate' | 'persist'

export interface SqliteSessionStoreOptions {
  /** Database file, or `':memory:'`. */
  path: string
  /** Default `'wal'`. */
  journalMode?: SqliteJournalMode
}

/** Sessions in one SQLite database (schema version 4, shared with the TypeScript backend). */
export declare class SqliteSessionStore extends StoreMethods implements DurableSessionStore {
  constructor(options: SqliteSessionStoreOptions)
  locate(header: SessionHeader): undefined
}

export interface PostgresSessionStoreOptions {
  /**
   * A libpq-style URL (`postgres://user:password@host:port/db`) or keyword/value
   * string, as `pg` and `psql` accept; TLS with libpq's `sslmode` (`disable`,
   * `prefer` (default), `require`, `verify-ca`, `verify-full`), `sslrootcert`,
   * `sslcert`/`sslkey` (docs/POSTGRES.md).
   */
  connectionString: string
  /**
   * Schema holding `sessions`, `events`, `leases` and `dsh_meta` (created on first use). Default `'public'`.
   * At most 63 bytes of UTF-8 (PostgreSQL truncates longer names); a longer one throws `INVALID_ARGUMENT`.
   */
  schema?: string
  /** Connections the store opens at most. Default 4. */
  poolSize?: number
  /**
   * How long a writer's lease on a session lasts after its last write, in ms
   * (renewed by every append and flush). Another store takes over an expired
   * lease; the old writer's next write then rejects with `LEASE_LOST`. Default 30000.
   */
  leaseMs?: number
  /**
   * Limit of every statement (and lock wait), in ms: the server's
   * `statement_timeout`, and the client waits at most 500 ms longer for an
   * answer (a server that stops answering fails the call with `PG`). Default 30000.
   */
  statementTimeoutMs?: number
  /**
   * Limit of opening a connection, in ms: TCP, TLS, authentication and a first
   * query (unless the URL sets `connect_timeout`). Default 10000.
   */
  connectTimeoutMs?: number
}

/**
 * Sessions in the SPEC 11 tables of one PostgreSQL schema, one writer per
 * session across hosts. Rejections carry `code`: `PG_CONNECT` (the server
 * cannot be reached), `PG` (a statement failed or timed out),
 * `SESSION_IN_USE` (another store holds the session's lease),
 * `LEASE_LOST` (this store's lease was taken over: it never writes the
 * session again), besides the codes of the other stores.
 */
export declare class PostgresSessionStore extends StoreMethods implements DurableSessionStore {
  constructor(options: PostgresSessionStoreOptions)
  locate(header: SessionHeader): undefined
}

// ---------------------------------------------------------------- the SessionStore service (SPEC 12)

/** Options of `ctx.sessions.create` / `prepare`. */
export interface CreateSessionOptions {
  /** Events to replay (validated and snapshotted as by `new Session`). */
  readonly seed?: readonly SessionEvent[]
  /**
   * Instead of `seed`: a session whose whole log the new one continues as it
   * is, without checking it event by event (a resume:
   * `ctx.sessions.create(id, { from: await store.open(id), meta })`).
   */
  readonly from?: Session
  /** Header fields; `createdAt` defaults to now. Other keys are ignored. */
  readonly meta?: {
    readonly cwd?: string
    readonly parentSession?: SessionId
    readonly createdAt?: number
    readonly seedLength?: number
  }
}

/** What `fork` forks: a live session object, or the id of one. */
export type SessionForkSource = Session | SessionId

export type SessionForkErrorCode =
  | 'SESSION_NOT_FOUND'
  | 'SESSION_NOT_LIVE'
  | 'SESSION_ALREADY_EXISTS'
  | 'INVALID_BOUNDARY'
  | 'OPEN_TURN'

/** A `ctx.sessions.fork` failure; `name` is `'SessionForkError'`. */
export declare class SessionForkError extends SessionError {
  constructor(message: string, code: SessionForkErrorCode)
  readonly code: SessionForkErrorCode
}

/**
 * The Cordis service of live sessions (`ctx.plugin(SessionStore)` registers
 * it as `ctx.sessions`), and the only publisher of the `session/*` events.
 * It stores nothing durably: persistence plugins follow `session/event` and
 * drain on `session/flush`. Its peers, cordis 4 and `@deepseek-ai/dsh-scope`,
 * are the consumer's, loaded when the service is first constructed.
 */
export declare class SessionStore extends CordisService {
  constructor(ctx: CordisContext)
  /**
   * `prepare`, then enter and announce on the calling fiber (one effect,
   * `sessions.create()`): the session lives until that fiber unloads.
   * Throws `session "ID" already exists` for a live id.
   */
  create(id?: SessionId | string, options?: CreateSessionOptions): Session
  /** A new session, neither entered nor announced; an omitted id is minted (`session-<n>`). */
  prepare(id?: SessionId | string, options?: CreateSessionOptions): Session
  /** Register a session (no event) through the calling context's scope; returns its detach. */
  enter(session: Session): () => void
  /** Deliver `session/created` for an entered session, once. */
  announce(session: Session): void
  /**
   * Run every `session/flush` listener of a live session and wait for all;
   * rejects with the first failing listener's raw reason.
   */
  flush(session: Session): Promise<void>
  /** The entered session of that id, or `undefined`. */
  get(id: SessionId | string): Session | undefined
  /** The entered sessions, in entry order (a fresh array). */
  list(): Session[]
  /**
   * A child session seeded with `source`'s events `0..=boundary` (default:
   * the whole log), which must end on a `turn/end`; created (entered and
   * announced) on the calling fiber. Throws {@link SessionForkError}.
   */
  fork(source: SessionForkSource | string, boundary?: number, childSessionId?: SessionId | string): Session
}

// The default export (the class, for `import SessionStore from`) is the ES
// module entry's: index.d.mts. This CommonJS entry has none.

/** The events the store publishes, each delivered through the session owner's scope carrier. */
interface SessionStoreEvents {
  /** A session was announced. Delivered like `emit`. */
  'session/created'(this: Scoped<Session>, session: Session): void
  /** An announced session left the store (`get(id)` is already `undefined`). Delivered like `emit`. */
  'session/disposed'(this: Scoped<Session>, session: Session): void
  /** An event was appended (it is last in `session.events`). Delivered like `emit`. */
  'session/event'(this: Scoped<Session>, session: Session, event: SessionEvent): void
  /** `ctx.sessions.flush(session)`: drain what you hold. Awaited like `parallel`. */
  'session/flush'(this: Scoped<Session>, session: Session): Promise<void> | void
}

// The consumer names cordis `@deepseek-ai/cordis` (the published packages)
// or `cordis` (the monorepo): both are augmented. An augmentation of a module
// that is not installed would be an error without `skipLibCheck`: hence the
// ts-ignore on each.
// @ts-ignore
declare module '@deepseek-ai/cordis' {
  interface Context {
    sessions: SessionStore
  }
  interface Events extends SessionStoreEvents {}
}

// @ts-ignore
declare module 'cordis' {
  interface Context {
    sessions: SessionStore
  }
  interface Events extends SessionStoreEvents {}
}
