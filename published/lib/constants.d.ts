export declare const TOOL_NOT_STARTED = "TOOL_NOT_STARTED";
export declare const TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN";
