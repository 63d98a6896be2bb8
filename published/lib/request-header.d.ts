import type { EpochHeader, SessionEvent } from './types.js';
export declare function canonicalHeader(header: EpochHeader): EpochHeader;
export declare function headerEquals(a: EpochHeader, b: EpochHeader): boolean;
export declare function foldRequestHeader(events: readonly SessionEvent[], from?: EpochHeader): EpochHeader | undefined;
