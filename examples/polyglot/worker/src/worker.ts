// The TypeScript worker of examples/polyglot: polls the task queue `polyglot` on the platform's Temporal and runs
// its workflows, each reporting its end to the platform (the interceptors module).
import { NativeConnection, Worker } from "@temporalio/worker";

async function main(): Promise<void> {
  const address = process.env.ORCHESTRATOR_TEMPORAL_ADDRESS || "127.0.0.1:7233";
  const namespace = process.env.ORCHESTRATOR_TEMPORAL_NAMESPACE || "default";
  const taskQueue = process.env.POLYGLOT_TASK_QUEUE || "polyglot";
  const connection = await NativeConnection.connect({ address });
  const worker = await Worker.create({
    connection,
    namespace,
    taskQueue,
    workflowsPath: require.resolve("./workflows"),
    interceptors: { workflowModules: [require.resolve("@orchestrator/client/workflow/interceptors")] },
  });
  console.log(`polyglot worker: polling ${taskQueue} on ${address} (namespace ${namespace})`);
  await worker.run();
  await connection.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
