// silero VAD in ONNX Runtime over 100 chunks of 512 samples (16 kHz) with h/c carried between
// calls: writes each chunk (xK.npy), sr.npy, h0/c0.npy and ORT's outputs (ort_outK.npy, ort_hK.npy)
// to the current directory. node silero_ort.js SILERO.onnx  (tests/zoo/silero_vs_ort.sh runs it)
const fs = require('fs');
const ort = require('/tmp/ort/node_modules/onnxruntime-node');
function npy(path, data, shape, descr) {
  const sh = '(' + shape.join(', ') + (shape.length === 1 ? ',)' : ')');
  let header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + sh + ', }';
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const head = Buffer.alloc(10); head.write('\x93NUMPY', 0, 'latin1'); head[6] = 1; head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}
(async () => {
  const s = await ort.InferenceSession.create(process.argv[2], { intraOpNumThreads: 1 });
  let h = new Float32Array(128), c = new Float32Array(128);
  let seed = 12345; const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  npy('sr.npy', new BigInt64Array([16000n]), [], '<i8');
  npy('h0.npy', h, [2, 1, 64], '<f4'); npy('c0.npy', c, [2, 1, 64], '<f4');
  for (let k = 0; k < 100; ++k) {
    const x = new Float32Array(512);
    const loud = (k % 20) >= 8 && (k % 20) < 15;  // bursts of tone + noise
    for (let i = 0; i < 512; ++i) { const t = k * 512 + i; x[i] = (loud ? 0.5 * Math.sin(t * 0.07) * Math.sin(t * 0.0031) : 0) + 0.02 * (rnd() - 0.5); }
    npy(`x${k}.npy`, x, [1, 512], '<f4');
    const r = await s.run({ input: new ort.Tensor('float32', x, [1, 512]), sr: new ort.Tensor('int64', new BigInt64Array([16000n]), []),
                            h: new ort.Tensor('float32', h, [2, 1, 64]), c: new ort.Tensor('float32', c, [2, 1, 64]) });
    npy(`ort_out${k}.npy`, r.output.data, r.output.dims, '<f4');
    h = r.hn.data; c = r.cn.data;
    npy(`ort_h${k}.npy`, h, [2, 1, 64], '<f4');
  }
})().catch(e => { console.error(e); process.exit(1); });
