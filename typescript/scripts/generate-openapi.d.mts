/** Where the generated types are written. */
export declare const OUTPUT: string;
/** The document read when no source is given: the one the service embeds. */
export declare const DEFAULT_SOURCE: URL;
/** Returns the TypeScript module of the types of the OpenAPI document at source. */
export declare function generate(source?: URL | string): Promise<string>;
