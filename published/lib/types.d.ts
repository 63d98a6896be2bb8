// The client-safe types of the published line (PUB 13.1). The root entry
// re-exports this module, so `declare module '<package>/types'` augmentations
// of SessionEventMap and TurnEndReasonMap reach the root's types too.
import type { Branded } from '@deepseek-ai/dsh-brand';
import type { AssistantMessage, CallId, LlmCallConfig, LlmCallConfigAdapterDefaults, LlmFailure, StreamChunk, TokenUsage, ToolResultMessage, ToolSchema, UserMessage } from '@deepseek-ai/dsh-llm';
import type { JsonValue } from './json.js';
export type { JsonValue } from './json.js';

/** Identifies one session in the store. */
export type SessionId = Branded<'SessionId'>;
/** Brand a string as a SessionId (the identity at run time). */
export declare function SessionId(id: string): SessionId;
/** The session format version: `0`. */
export declare const SESSION_FORMAT_VERSION = 0;

/** Immutable validated session metadata (PUB 4.4). */
export interface SessionHeader {
    readonly version: number;
    readonly id: SessionId;
    readonly createdAt: number;
    readonly cwd?: string;
    readonly parentSession?: SessionId;
    readonly seedLength?: number;
    readonly origin?: 'subagent';
    readonly delegationDepth?: number;
    readonly agentPreset?: string;
}
/** Options of `SessionStore.create` (PUB 12.1). */
export interface CreateSessionOptions {
    readonly seed?: readonly SessionEvent[];
    readonly meta?: {
        readonly cwd?: string;
        readonly parentSession?: SessionId;
        readonly createdAt?: number;
        readonly seedLength?: number;
        readonly origin?: 'subagent';
        readonly delegationDepth?: number;
        readonly agentPreset?: string;
    };
}
/** The ownership-transfer path of `SessionStore.prepare` (PUB 12.3). */
export interface RestoredSessionOptions {
    readonly seed: SessionEvent[];
    readonly meta: SessionHeader;
    readonly seedSource: 'persistence';
}
/** Inputs of `SessionStore.prepare`. */
export type PrepareSessionOptions = (CreateSessionOptions & {
    readonly seedSource?: undefined;
}) | RestoredSessionOptions;
/** Why an active agent driver was cancelled. */
export type AgentCancelCause = {
    readonly kind: 'user';
} | {
    readonly kind: 'parent';
} | {
    readonly kind: 'hook';
    readonly reason: string;
} | {
    readonly kind: 'disposed';
};
/** A durable cancellation cause. */
export type TurnEndCancelCause = AgentCancelCause | {
    readonly kind: 'legacy';
};
/** Why a turn ended; merge-extensible. */
export interface TurnEndReasonMap {
    completed: {
        kind: 'completed';
    };
    aborted: {
        kind: 'aborted';
        reason: TurnEndCancelCause;
    };
    blocked: {
        kind: 'blocked';
    };
    error: {
        kind: 'error';
        error: LlmFailure;
    };
    'max-tokens': {
        kind: 'max-tokens';
    };
    interrupted: {
        kind: 'interrupted';
    };
}
/** The union over TurnEndReasonMap. */
export type TurnEndReason = TurnEndReasonMap[keyof TurnEndReasonMap];
/** One entry of a `todo/write` snapshot. */
export interface TodoItem {
    content: string;
    status: 'pending' | 'in_progress' | 'completed';
}
/** The logged request state (PUB 8). */
export interface EpochHeader {
    config: LlmCallConfig;
    adapterDefaults?: LlmCallConfigAdapterDefaults;
    system?: string;
    tools?: ToolSchema[];
}
/** Route metadata of `request/context` (PUB 2.3). */
export interface RequestContext {
    provider: string;
    model: string;
    contextWindow?: number;
}
/** Why a `request/header` was appended. */
export type RequestHeaderReason = 'initial' | 'resume' | 'change';
/** The event vocabulary (PUB 2.1); plugins add types by declaration merging (PUB 2.5). */
export interface SessionEventMap {
    'turn/start': {
        turn: number;
    };
    'turn/end': {
        turn: number;
        reason: TurnEndReason;
    };
    'step/start': {
        turn: number;
        step: number;
    };
    'step/end': {
        turn: number;
        step: number;
    };
    'user/message': UserMessage;
    'assistant/chunk': {
        turn: number;
        step: number;
        chunk: StreamChunk;
    };
    'assistant/message': {
        turn: number;
        step: number;
        message: AssistantMessage;
        usage?: TokenUsage;
        interrupted?: true;
    };
    'tool/call': {
        turn: number;
        step: number;
        callId: CallId;
        name: string;
        arguments: string;
    };
    'tool/result': {
        turn: number;
        step: number;
        message: ToolResultMessage;
        error?: {
            name: string;
            code: string;
        };
        meta?: JsonValue;
    };
    'todo/write': {
        todos: TodoItem[];
    };
    'request/header': {
        header: EpochHeader;
        reason: RequestHeaderReason;
    };
    'request/context': RequestContext;
    'session/end-seed': Record<string, never>;
}
/** Every appendable event type, merged extensions included. */
export type SessionEventType = keyof SessionEventMap;
/** The three surface-eligible types (PUB 6). */
export type SurfaceEventType = 'user/message' | 'assistant/message' | 'tool/result';
/** A surface-eligible event carrying its marker. */
export type SurfaceEvent = SessionEvent<SurfaceEventType> & {
    surfaceOp: SurfaceOp;
};
/** How an event entered the surface. */
export type SurfaceOp = 'append' | {
    op: 'replace';
    start: number;
    end: number;
};
/** The third argument of `append` for surface-eligible types. */
export interface SurfaceIntent {
    surfaceOp: SurfaceOp;
    sourceEventSeqs?: number[];
}
/** One entry of the log (PUB 1): a discriminated union over `type`. */
export type SessionEvent<T extends SessionEventType = SessionEventType> = {
    [K in SessionEventType]: {
        type: K;
        seq: number;
        time: number;
        data: SessionEventMap[K];
        ignorable?: true;
    } & (K extends SurfaceEventType ? {
        sourceEventSeqs?: number[];
        surfaceOp?: SurfaceOp;
    } : object);
}[T];
