/* tslint:disable */
/* eslint-disable */
export const memory: WebAssembly.Memory;
export const diagnose: (a: number, b: number, c: number) => [number, number, number];
export const diagnoseBytes: (a: number, b: number, c: number) => [number, number, number];
export const diagnoseBytesJson: (a: number, b: number, c: number) => [number, number, number, number];
export const diagnoseJson: (a: number, b: number, c: number) => [number, number, number, number];
export const explain: (a: number, b: number, c: number) => [number, number, number];
export const explainJson: (a: number, b: number, c: number) => [number, number, number, number];
export const explainMarkdown: (a: number, b: number, c: number) => [number, number, number, number];
export const rules: (a: number) => [number, number, number];
export const version: () => [number, number];
export const __wbindgen_malloc: (a: number, b: number) => number;
export const __wbindgen_realloc: (a: number, b: number, c: number, d: number) => number;
export const __wbindgen_free: (a: number, b: number, c: number) => void;
export const __wbindgen_exn_store: (a: number) => void;
export const __externref_table_alloc: () => number;
export const __wbindgen_externrefs: WebAssembly.Table;
export const __externref_table_dealloc: (a: number) => void;
export const __wbindgen_start: () => void;
