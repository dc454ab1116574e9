// The bootstrap over the TCP store that rank 0 hosts at MASTER_ADDR:MASTER_PORT.
import type { Bootstrap } from "./bootstrap.js";
import { rendezvous, type RendezvousOptions } from "./rendezvous.js";

export async function tcpBootstrap(o: RendezvousOptions): Promise<Bootstrap> {
  const rdv = await rendezvous(o);
  const { store } = rdv;
  return {
    kind: "tcp",
    store,
    allGather: async (key, value) => (await store.allGather(key, o.size, value, o.timeoutMs)).map(String),
    broadcast: async (key, value) => {
      if (o.rank !== 0) return (await store.get(key, o.timeoutMs)).toString();
      if (value === undefined) throw new Error(`bootstrap: rank 0 has no value for "${key}"`);
      await store.set(key, value);
      return value;
    },
    barrier: (key) => store.barrier(key, o.size, o.timeoutMs),
    close: (failed) => rdv.close({ abandon: failed ?? false }),
  };
}
