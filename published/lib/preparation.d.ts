import type { Session } from './index.js';
export interface SessionPreparationOptions {
    readonly release?: () => void;
}
/** One unpublished session and its release (PUB 15). */
export declare class SessionPreparation implements Disposable {
    #private;
    readonly session: Session;
    private constructor();
    static create(session: Session, options?: SessionPreparationOptions): SessionPreparation;
    [Symbol.dispose](): void;
}
