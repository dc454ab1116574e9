/** The user asked for something this build or this placement cannot do (exit code 2). */
export class BackendError extends Error {
  readonly exitCode = 2;
}
