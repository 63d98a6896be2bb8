/** A value that survives `JSON.stringify` → `JSON.parse` unchanged (PUB 3). */
export type JsonValue = null | boolean | number | string | JsonValue[] | {
    [key: string]: JsonValue;
};
/** PUB 3: a detached copy in this realm, or `undefined` when `value` is not lossless JSON. */
export declare function snapshotJsonValue<T>(value: T): T | undefined;
/** PUB 3: whether `value` is lossless JSON. */
export declare function isJsonValue(value: unknown): boolean;
/** Freeze a tree in place, iteratively; returns it. Internal to the package (not a root export). */
export declare function deepFreezeInPlace<T>(value: T): T;
/** Internal: a snapshot deep-frozen as it is built, or undefined when not lossless. */
export declare function snapshotFrozenJsonValue<T>(value: T): T | undefined;
/** Internal: freeze in place, stopping at already-frozen subtrees; returns `value`. */
export declare function deepFreezeFresh<T>(value: T): T;
