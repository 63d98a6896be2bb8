// The root entry of the published line (PUB 13). It re-exports `./types`
// itself (not a copy), so augmenting `<package>/types` or the root merges into
// one SessionEventMap (PUB 2.5).
import { Context, Service } from '@deepseek-ai/cordis';
import type { Scoped } from '@deepseek-ai/dsh-scope';
import type { Message } from '@deepseek-ai/dsh-llm';
import type { TypertLookup } from '@deepseek-ai/dsh-typert-protocol';
import type { CreateSessionOptions, EpochHeader, PrepareSessionOptions, RequestContext, SessionEvent, SessionEventMap, SessionEventType, SessionHeader, SessionId, SurfaceEventType, SurfaceIntent } from './types.js';
import type { SessionSurface } from './surface.js';
export * from './types.js';
export { SessionPreparation } from './preparation.js';
export type { SessionPreparationOptions } from './preparation.js';
export type { AssistantMessage, ToolResultMessage, UserMessage } from '@deepseek-ai/dsh-llm';
export { isJsonValue, snapshotJsonValue } from './json.js';
export type { JsonValue } from './json.js';
export { TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN } from './constants.js';
export { decodeStorageRecord, packChunkRuns } from './chunk-rows.js';
export type { ChunkRow, StorageRecord } from './chunk-rows.js';
export type { SessionSurface, SurfaceFoldReplacement, SurfaceFoldResult } from './surface.js';
export { deriveEventMessage, foldSurface, isAppendSurfaceEvent, isReplacementSurfaceEvent, isSurfaceEvent, isSurfaceEligibleType } from './surface.js';
export { canonicalHeader, foldRequestHeader, headerEquals } from './request-header.js';
export { KNOWN_SESSION_EVENT_TYPES } from './known-event-types.js';

declare module '@deepseek-ai/cordis' {
    interface Context {
        sessions: SessionStore;
    }
    interface Events {
        'session/created'(this: Scoped<Session>, session: Session): void;
        'session/disposed'(this: Scoped<Session>, session: Session): void;
        'session/event'(this: Scoped<Session>, session: Session, event: SessionEvent): void;
        'session/flush'(this: Scoped<Session>, session: Session): Promise<void> | void;
    }
}
declare module '@deepseek-ai/dsh-typert-protocol' {
    interface TypertLookupMap {
        session: TypertLookup<Session, SessionId>;
    }
}

/** PUB 9: the closers that end an open turn left by a crash. */
export declare function interruptedTurnClosers(events: readonly SessionEvent[]): SessionEvent[];
/** PUB 14.1: validate the message shape and deep-freeze only the message, in place; returns the same object. */
export declare function adoptSessionEvent<T extends SessionEvent>(event: T): T;
/** PUB 14.1: `adoptSessionEvent(structuredClone(event))`. */
export declare function snapshotSessionEvent<T extends SessionEvent>(event: T): T;

/** One session: an append-only event log with its surface and folds (PUB 4–8). */
export declare class Session {
    #private;
    /** The live surface view. */
    get surface(): SessionSurface;
    readonly header: SessionHeader;
    get id(): SessionId;
    /** The seed length, or 0 without a seed (PUB 4.3). */
    readonly firstLiveSeq: number;
    /** Validate and snapshot a borrowed seed and header (PUB 4.1). */
    static create(id: SessionId, seed?: readonly SessionEvent[], header?: SessionHeader): Session;
    /** Take ownership of fresh graphs: validate, then freeze in place (PUB 4.1). */
    static fromRestore(id: SessionId, seed: readonly SessionEvent[], header: SessionHeader): Session;
    private constructor();
    get events(): readonly SessionEvent[];
    get seq(): number;
    append<T extends SessionEventType>(type: T, data: SessionEventMap[T], ...opts: T extends SurfaceEventType ? [opts: SurfaceIntent] : []): SessionEvent<T>;
    requestHeader(): EpochHeader | undefined;
    requestContext(): RequestContext | undefined;
    deriveMessages(): Message[];
    deriveEventMessage(event: SessionEvent): Message | null;
}

export type SessionForkSource = Session | SessionId;
export type SessionForkErrorCode = 'SESSION_NOT_FOUND' | 'SESSION_NOT_LIVE' | 'SESSION_ALREADY_EXISTS' | 'INVALID_BOUNDARY' | 'OPEN_TURN';
export declare class SessionForkError extends Error {
    readonly code: SessionForkErrorCode;
    constructor(message: string, code: SessionForkErrorCode);
}

/** The Cordis `sessions` service (PUB 12). */
export declare class SessionStore extends Service {
    #private;
    constructor(ctx: Context);
    create(id?: SessionId, options?: CreateSessionOptions): Session;
    prepare(id?: SessionId, options?: PrepareSessionOptions): Session;
    enter(session: Session): () => void;
    announce(session: Session): void;
    flush(session: Session): Promise<boolean>;
    get(id: SessionId): Session | undefined;
    list(): Session[];
    fork(source: SessionForkSource, boundary?: number, childSessionId?: SessionId): Session;
}
export default SessionStore;
