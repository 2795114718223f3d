/**
 * ORT-format models (`.ort`, onnxruntime's pre-optimized flat format) turned back into
 * ONNX, once, at set-up.
 *
 * Why: an `.ort` file is loaded with the optimizations it was saved with and no others, so
 * a model whose int8 weights are de-quantized by graph nodes (Cast, Mul) pays for that on
 * every run. Saved as ONNX after the basic (hardware-independent) optimizations, the
 * same graph is re-optimized at load with `graphOptimizationLevel: 'all'`, which folds
 * those nodes into constants once per process.
 *
 * onnxruntime writes control-flow subgraphs (an `If`'s then/else branches) without a
 * name, and refuses an ONNX model whose subgraphs have none on reload: they are named
 * after their node and attribute (`onnx-proto` reads and writes the protobuf).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { onnx } from 'onnx-proto';

/** The ONNX bytes of an `.ort` model after onnxruntime's basic optimizations, its subgraphs named. Deterministic for one onnxruntime version. */
export async function ortToOnnx(ortModel: Uint8Array): Promise<Buffer> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'onnx-ort-'));
  try {
    const out = path.join(tmp, 'model.onnx');
    const session = await ort.InferenceSession.create(ortModel, {
      graphOptimizationLevel: 'basic',
      optimizedModelFilePath: out,
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
    });
    await session.release();
    return nameSubgraphs(fs.readFileSync(out));
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** Gives every unnamed subgraph of an ONNX model the name `<node name or op>_<attribute>`; the bytes unchanged when all have one. */
export function nameSubgraphs(model: Buffer): Buffer {
  const m = onnx.ModelProto.decode(model);
  let named = 0;
  const walk = (graph: onnx.IGraphProto) => {
    for (const node of graph.node ?? []) {
      for (const attr of node.attribute ?? []) {
        const subgraphs = [...(attr.g ? [attr.g] : []), ...(attr.graphs ?? [])];
        subgraphs.forEach((g, i) => {
          if (!g.name) {
            g.name = `${node.name || node.opType}_${attr.name}${subgraphs.length > 1 ? `_${i}` : ''}`;
            named++;
          }
          walk(g);
        });
      }
    }
  };
  if (m.graph) walk(m.graph);
  return named ? Buffer.from(onnx.ModelProto.encode(m).finish()) : model;
}
