# SGLang launch command exported by autospec from study 'made', trial 5
# measured: output_tok_s@c1 = 124.0 +-1.2 tok/s, agg_output_tok_s@c32 = 1370.0 +-13.7 tok/s
# adaptive: steps per batch size from /etc/sglang/ladder.json (candidates [2, 3, 5]), starting at steps=5
python -m sglang.launch_server \
    --model-path /srv/models/target \
    --speculative-algorithm EAGLE \
    --speculative-draft-model-path /models/eagle \
    --attention-backend triton \
    --speculative-num-steps 5 \
    --speculative-eagle-topk 1 \
    --mem-fraction-static 0.8 \
    --speculative-num-draft-tokens 6 \
    --speculative-adaptive \
    --speculative-adaptive-config /etc/sglang/ladder.json \
    --enable-metrics \
    --host 127.0.0.1 \
    --port 30000
