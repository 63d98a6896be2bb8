// Type tests of the published line's hand-written declarations (PUB 13, 2.5, 12.1, 5).
// Compiled by __test__/published-types.test.ts with tsc and this folder's tsconfig,
// whose paths resolve the peers from test-published/ and the package under upstream's name.
import { expectTypeOf } from 'vitest'
import { Context } from '@deepseek-ai/cordis'
import type { TypertLookup, TypertLookupMap } from '@deepseek-ai/dsh-typert-protocol'
import type { AssistantMessage as LlmAssistantMessage, Message, UserMessage as LlmUserMessage } from '@deepseek-ai/dsh-llm'
import type { Branded } from '@deepseek-ai/dsh-brand'
import SessionStoreDefault, {
  KNOWN_SESSION_EVENT_TYPES, SESSION_FORMAT_VERSION, Session, SessionForkError, SessionId, SessionPreparation, SessionStore,
  TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, adoptSessionEvent, canonicalHeader, decodeStorageRecord, deriveEventMessage,
  foldRequestHeader, foldSurface, headerEquals, interruptedTurnClosers, isAppendSurfaceEvent, isJsonValue,
  isReplacementSurfaceEvent, isSurfaceEligibleType, isSurfaceEvent, packChunkRuns, snapshotJsonValue, snapshotSessionEvent,
} from '@deepseek-ai/dsh-session'
import type {
  AssistantMessage, ChunkRow, EpochHeader, JsonValue, RequestContext, SessionEvent, SessionEventMap, SessionEventType,
  SessionForkErrorCode, SessionForkSource, SessionHeader, SessionPreparationOptions, SessionSurface, StorageRecord,
  SurfaceEventType, SurfaceFoldReplacement, SurfaceFoldResult, SurfaceIntent, ToolResultMessage, TurnEndReason, UserMessage,
  CreateSessionOptions, RestoredSessionOptions, PrepareSessionOptions, AgentCancelCause, TurnEndCancelCause, TurnEndReasonMap,
  TodoItem, RequestHeaderReason, SurfaceEvent, SurfaceOp,
} from '@deepseek-ai/dsh-session'
import * as typesModule from '@deepseek-ai/dsh-session/types'
import type * as T from '@deepseek-ai/dsh-session/types'
import * as surfaceModule from '@deepseek-ai/dsh-session/surface'
import type { SurfaceManager } from '@deepseek-ai/dsh-session/surface'
import * as invariant from '@deepseek-ai/dsh-session/invariant'

// PUB 13: the default export is SessionStore.
expectTypeOf(SessionStoreDefault).toEqualTypeOf<typeof SessionStore>()
expectTypeOf<typeof SESSION_FORMAT_VERSION>().toEqualTypeOf<0>()
expectTypeOf<typeof TOOL_NOT_STARTED>().toEqualTypeOf<'TOOL_NOT_STARTED'>()
expectTypeOf<typeof TOOL_OUTCOME_UNKNOWN>().toEqualTypeOf<'TOOL_OUTCOME_UNKNOWN'>()
expectTypeOf(KNOWN_SESSION_EVENT_TYPES).toEqualTypeOf<ReadonlySet<string>>()
// @ts-expect-error -- ReadonlySet has no add (PUB 2.4)
KNOWN_SESSION_EVENT_TYPES.add('x')

// PUB 13.1: SessionId is a brand and a function.
expectTypeOf<SessionId>().toEqualTypeOf<Branded<'SessionId'>>()
expectTypeOf(SessionId).toEqualTypeOf<(id: string) => SessionId>()
const id = SessionId('s')
// @ts-expect-error -- a plain string is not a SessionId
const notId: SessionId = 's'
void notId

// PUB 2.5: the root's types are the very declarations of ./types, and augmentation merges.
expectTypeOf<SessionEventMap>().toEqualTypeOf<T.SessionEventMap>()
expectTypeOf<SessionEvent>().toEqualTypeOf<T.SessionEvent>()
expectTypeOf<SessionEventMap['x/plugin']>().toEqualTypeOf<{ value: number }>()
expectTypeOf<'x/plugin'>().toMatchTypeOf<SessionEventType>()
expectTypeOf<SurfaceEventType>().toEqualTypeOf<'user/message' | 'assistant/message' | 'tool/result'>()
expectTypeOf<{ kind: 'x-reason'; detail: string }>().toMatchTypeOf<TurnEndReason>()
expectTypeOf(typesModule.SessionId).toEqualTypeOf(SessionId)
expectTypeOf<keyof typeof typesModule>().toEqualTypeOf<'SessionId' | 'SESSION_FORMAT_VERSION'>()

// PUB 13: dsh-llm message types are re-exported.
expectTypeOf<AssistantMessage>().toEqualTypeOf<LlmAssistantMessage>()
expectTypeOf<UserMessage>().toEqualTypeOf<LlmUserMessage>()
expectTypeOf<SessionEventMap['tool/result']['message']>().toEqualTypeOf<ToolResultMessage>()
expectTypeOf<SessionEventMap['user/message']>().toEqualTypeOf<UserMessage>()
expectTypeOf<SessionEventMap['session/end-seed']>().toEqualTypeOf<Record<string, never>>()
expectTypeOf<SessionEventMap['request/context']>().toEqualTypeOf<RequestContext>()
expectTypeOf<SessionEventMap['tool/result']['meta']>().toEqualTypeOf<JsonValue | undefined>()

// PUB 1: the envelope; surface fields only on surface types.
declare const ev: SessionEvent
if (ev.type === 'tool/result') {
  expectTypeOf(ev.surfaceOp).toEqualTypeOf<SurfaceOp | undefined>()
  expectTypeOf(ev.ignorable).toEqualTypeOf<true | undefined>()
}
if (ev.type === 'turn/start') {
  // @ts-expect-error -- log-only events carry no surfaceOp
  void ev.surfaceOp
}

// PUB 4, 5: Session.
declare const session: Session
expectTypeOf(Session.create).toEqualTypeOf<(id: SessionId, seed?: readonly SessionEvent[], header?: SessionHeader) => Session>()
expectTypeOf(Session.fromRestore).toEqualTypeOf<(id: SessionId, seed: readonly SessionEvent[], header: SessionHeader) => Session>()
// @ts-expect-error -- fromRestore requires the header
Session.fromRestore(id, [])
// @ts-expect-error -- the constructor is private (PUB 4.1)
new Session()
expectTypeOf(session.firstLiveSeq).toEqualTypeOf<number>()
expectTypeOf(session.id).toEqualTypeOf<SessionId>()
expectTypeOf(session.header).toEqualTypeOf<SessionHeader>()
expectTypeOf(session.events).toEqualTypeOf<readonly SessionEvent[]>()
expectTypeOf(session.seq).toEqualTypeOf<number>()
expectTypeOf(session.surface).toEqualTypeOf<SessionSurface>()
expectTypeOf(session.requestHeader()).toEqualTypeOf<EpochHeader | undefined>()
expectTypeOf(session.requestContext()).toEqualTypeOf<RequestContext | undefined>()
expectTypeOf(session.deriveMessages()).toEqualTypeOf<Message[]>()
expectTypeOf(session.deriveEventMessage).toEqualTypeOf<(event: SessionEvent) => Message | null>()
declare const userMessage: UserMessage
expectTypeOf(session.append('turn/start', { turn: 1 })).toEqualTypeOf<SessionEvent<'turn/start'>>()
expectTypeOf(session.append('user/message', userMessage, { surfaceOp: 'append' })).toEqualTypeOf<SessionEvent<'user/message'>>()
session.append('x/plugin', { value: 1 })
// @ts-expect-error -- surface types require the SurfaceIntent (SPEC 4)
session.append('user/message', userMessage)
// @ts-expect-error -- log-only types forbid it
session.append('turn/start', { turn: 1 }, { surfaceOp: 'append' })
// @ts-expect-error -- payloads are typed
session.append('turn/start', { turn: '1' })
// @ts-expect-error -- unknown types are not appendable
session.append('nope/never', {})
const intent: SurfaceIntent = { surfaceOp: { op: 'replace', start: 0, end: 1 }, sourceEventSeqs: [0, 1] }
void intent

// PUB 12: SessionStore and its Cordis / typert augmentation.
declare const ctx: Context
expectTypeOf(ctx.sessions).toEqualTypeOf<SessionStore>()
expectTypeOf<TypertLookupMap['session']>().toEqualTypeOf<TypertLookup<Session, SessionId>>()
declare const store: SessionStore
expectTypeOf(store.flush).toEqualTypeOf<(session: Session) => Promise<boolean>>()
expectTypeOf(store.create).toEqualTypeOf<(id?: SessionId, options?: CreateSessionOptions) => Session>()
expectTypeOf(store.prepare).toEqualTypeOf<(id?: SessionId, options?: PrepareSessionOptions) => Session>()
expectTypeOf(store.fork).toEqualTypeOf<(source: SessionForkSource, boundary?: number, childSessionId?: SessionId) => Session>()
expectTypeOf(store.get).toEqualTypeOf<(id: SessionId) => Session | undefined>()
expectTypeOf(store.list).toEqualTypeOf<() => Session[]>()
expectTypeOf(store.enter).toEqualTypeOf<(session: Session) => () => void>()
ctx.on('session/event', (s, e) => { expectTypeOf(s).toEqualTypeOf<Session>(); expectTypeOf(e).toEqualTypeOf<SessionEvent>() })
ctx.on('session/flush', async s => { expectTypeOf(s).toEqualTypeOf<Session>() })
const restored: RestoredSessionOptions = { seed: [], meta: { version: 0, id, createdAt: 0 }, seedSource: 'persistence' }
store.prepare(id, restored)
store.prepare(id, { seed: [], meta: { origin: 'subagent', delegationDepth: 1, agentPreset: 'p' } })
// @ts-expect-error -- origin is only 'subagent'
store.prepare(id, { meta: { origin: 'fork' } })
expectTypeOf<SessionForkErrorCode>().toEqualTypeOf<'SESSION_NOT_FOUND' | 'SESSION_NOT_LIVE' | 'SESSION_ALREADY_EXISTS' | 'INVALID_BOUNDARY' | 'OPEN_TURN'>()
expectTypeOf(new SessionForkError('m', 'OPEN_TURN').code).toEqualTypeOf<SessionForkErrorCode>()
expectTypeOf<SessionForkError>().toMatchTypeOf<Error>()

// PUB 13, 14, 15: the functions.
expectTypeOf(isJsonValue).toEqualTypeOf<(value: unknown) => boolean>()
expectTypeOf(snapshotJsonValue<{ a: number }>).returns.toEqualTypeOf<{ a: number } | undefined>()
expectTypeOf(packChunkRuns).toEqualTypeOf<(events: readonly SessionEvent[]) => StorageRecord[]>()
expectTypeOf(decodeStorageRecord).toEqualTypeOf<(value: unknown) => SessionEvent[]>()
expectTypeOf<ChunkRow['type']>().toEqualTypeOf<'text-chunks' | 'reasoning-chunks' | 'tool-call-chunks'>()
expectTypeOf(interruptedTurnClosers).toEqualTypeOf<(events: readonly SessionEvent[]) => SessionEvent[]>()
expectTypeOf(adoptSessionEvent<SessionEvent<'tool/result'>>).returns.toEqualTypeOf<SessionEvent<'tool/result'>>()
expectTypeOf(snapshotSessionEvent<SessionEvent<'user/message'>>).returns.toEqualTypeOf<SessionEvent<'user/message'>>()
expectTypeOf(canonicalHeader).toEqualTypeOf<(header: EpochHeader) => EpochHeader>()
expectTypeOf(headerEquals).toEqualTypeOf<(a: EpochHeader, b: EpochHeader) => boolean>()
expectTypeOf(foldRequestHeader).toEqualTypeOf<(events: readonly SessionEvent[], from?: EpochHeader) => EpochHeader | undefined>()
expectTypeOf(foldSurface).toEqualTypeOf<(events: readonly SessionEvent[]) => SurfaceFoldResult>()
expectTypeOf<SurfaceFoldResult['replacements']>().toEqualTypeOf<SurfaceFoldReplacement[]>()
expectTypeOf(deriveEventMessage).toEqualTypeOf<(event: SessionEvent) => Message | null>()
expectTypeOf(isSurfaceEligibleType).toEqualTypeOf<(type: string) => boolean>()
if (isSurfaceEvent(ev)) expectTypeOf(ev).toEqualTypeOf<SurfaceEvent>()
if (isAppendSurfaceEvent(ev)) {
  const op: 'append' = ev.surfaceOp
  void op
}
if (isReplacementSurfaceEvent(ev)) {
  const op: { op: 'replace'; start: number; end: number } = ev.surfaceOp
  // @ts-expect-error -- a replacement is not 'append'
  const notAppend: 'append' = ev.surfaceOp
  void op, notAppend
}
const prep = SessionPreparation.create(session, { release: () => {} })
expectTypeOf(prep.session).toEqualTypeOf<Session>()
expectTypeOf(prep).toMatchTypeOf<Disposable>()
expectTypeOf<SessionPreparationOptions>().toEqualTypeOf<{ readonly release?: () => void }>()
// @ts-expect-error -- the SessionPreparation constructor is private
new SessionPreparation(session, {})

// PUB 13.2: ./surface.
expectTypeOf(surfaceModule.foldSurface).toEqualTypeOf(foldSurface)
declare const manager: SurfaceManager
expectTypeOf(manager).toMatchTypeOf<SessionSurface>()
expectTypeOf(manager.nodes).toEqualTypeOf<readonly number[]>()
expectTypeOf(manager.replaceGeneration).toEqualTypeOf<number>()
expectTypeOf(manager.validateNext).toEqualTypeOf<(event: SessionEvent) => void>()
new surfaceModule.SurfaceManager([], 10)
// @ts-expect-error -- ./surface has no Session
void surfaceModule.Session

// PUB 13.3: ./invariant.
expectTypeOf<typeof invariant.name>().toEqualTypeOf<'session-invariant'>()
expectTypeOf(invariant.inject).toEqualTypeOf<string[]>()
expectTypeOf(invariant.apply).toEqualTypeOf<(ctx: Context) => Promise<() => void>>()

// Types of ./types (PUB 13.1), by name.
expectTypeOf<TodoItem['status']>().toEqualTypeOf<'pending' | 'in_progress' | 'completed'>()
expectTypeOf<RequestHeaderReason>().toEqualTypeOf<'initial' | 'resume' | 'change'>()
expectTypeOf<TurnEndCancelCause>().toEqualTypeOf<AgentCancelCause | { readonly kind: 'legacy' }>()
expectTypeOf<TurnEndReasonMap['aborted']>().toEqualTypeOf<{ kind: 'aborted'; reason: TurnEndCancelCause }>()
expectTypeOf<SessionHeader['origin']>().toEqualTypeOf<'subagent' | undefined>()
