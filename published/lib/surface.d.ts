import type { Message } from '@deepseek-ai/dsh-llm';
import type { SessionEvent, SurfaceEvent, SurfaceOp } from './types.js';
export declare function isSurfaceEligibleType(type: string): boolean;
export declare function isSurfaceEvent(event: SessionEvent): event is SurfaceEvent;
export declare function isAppendSurfaceEvent(event: SessionEvent): event is SurfaceEvent & {
    surfaceOp: 'append';
};
export declare function isReplacementSurfaceEvent(event: SessionEvent): event is SurfaceEvent & {
    surfaceOp: Extract<SurfaceOp, {
        op: 'replace';
    }>;
};
export declare function deriveEventMessage(event: SessionEvent): Message | null;
/** One replacement observed by a fold. */
export interface SurfaceFoldReplacement {
    seq: number;
    start: number;
    end: number;
    shadowedSeqs: number[];
}
/** The result of folding a whole log. */
export interface SurfaceFoldResult {
    nodes: number[];
    replacements: SurfaceFoldReplacement[];
}
/** The read-only live view of a session's surface. */
export interface SessionSurface {
    readonly nodes: readonly number[];
    readonly replaceGeneration: number;
}
export declare function foldSurface(events: readonly SessionEvent[]): SurfaceFoldResult;
/** An incremental surface over a contiguous window starting at `baseSeq`. */
export declare class SurfaceManager implements SessionSurface {
    #private;
    constructor(log: readonly SessionEvent[], baseSeq?: number);
    validateNext(event: SessionEvent): void;
    get replaceGeneration(): number;
    get nodes(): readonly number[];
}
