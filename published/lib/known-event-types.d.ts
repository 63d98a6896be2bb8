export declare const KNOWN_SESSION_EVENT_TYPES: ReadonlySet<string>;
