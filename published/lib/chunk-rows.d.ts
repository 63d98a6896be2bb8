import type { CallId } from '@deepseek-ai/dsh-llm';
import type { SessionEvent } from './types.js';
interface RunDataBase {
    turn: number;
    step: number;
    index: number;
    dt: number[];
}
interface TextRunData extends RunDataBase {
    texts: string[];
}
interface ToolCallRunData extends RunDataBase {
    id: CallId;
    name?: string;
    args: string[];
}
/** A packed run of delta chunks (PUB 14.2). */
export type ChunkRow = {
    type: 'text-chunks';
    seq0: number;
    time0: number;
    data: TextRunData;
} | {
    type: 'reasoning-chunks';
    seq0: number;
    time0: number;
    data: TextRunData;
} | {
    type: 'tool-call-chunks';
    seq0: number;
    time0: number;
    data: ToolCallRunData;
};
/** One durable log line: an event verbatim, or a packed row. */
export type StorageRecord = SessionEvent | ChunkRow;
export declare function packChunkRuns(events: readonly SessionEvent[]): StorageRecord[];
export declare function decodeStorageRecord(value: unknown): SessionEvent[];
export {};
