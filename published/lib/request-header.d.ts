import type { EpochHeader, SessionEvent } from './types.js';
export declare function canonicalHeader(header: EpochHeader): EpochHeader;
export declare function headerEquals(a: EpochHeader, b: EpochHeader): boolean;
export declare function foldRequestHeader(events: readonly SessionEvent[], from?: EpochHeader): EpochHeader | undefined;
/** Internal: PUB 5's legacy message for an append, or undefined. */
export declare function legacyAppendMessage(type: string, data: unknown): string | undefined;
/** Internal: PUB 4.2's delta message for a seed entry, or undefined. */
export declare function legacySeedDeltaMessage(index: number, type: unknown): string | undefined;
/** Internal: PUB 4.2's fallback message for a seed entry, or undefined. */
export declare function legacySeedReasonMessage(index: number, type: unknown, data: unknown): string | undefined;
