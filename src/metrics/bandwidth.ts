/** Algorithm bandwidth in GB/s (1e9 bytes), as nccl-tests prints it. */
export function algbw(bytes: number, timeUs: number): number {
  return timeUs > 0 ? bytes / (timeUs * 1e3) : 0;
}

export function busbw(bytes: number, timeUs: number, factor: number): number {
  return algbw(bytes, timeUs) * factor;
}
