import type { Context } from '@deepseek-ai/cordis';
/** The `./invariant` companion (PUB 10, 13.3). */
export declare const name = "session-invariant";
export declare const inject: string[];
export declare const apply: (ctx: Context) => Promise<() => void>;
