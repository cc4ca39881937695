import requests, threading, time, openai
B="http://127.0.0.1:18104"
body={"messages":[{"role":"user","content":"hi"}],"max_tokens":150,"ignore_eos":True}
res=[]
def go(i): 
    r=requests.post(B+"/v1/chat/completions",json=body); res.append((i,r.status_code,r.headers.get("Retry-After"),r.text[:250] if r.status_code!=200 else ""))
ts=[threading.Thread(target=go,args=(i,)) for i in range(4)]
for t in ts: t.start(); time.sleep(0.1)
time.sleep(0.3)
m=requests.get(B+"/metrics").text
print([l for l in m.splitlines() if not l.startswith("#") and ("processing" in l or "deferred" in l or "rejected" in l)])
for t in ts: t.join()
for x in sorted(res): print(x)
c=openai.OpenAI(base_url=B+"/v1",api_key="x",max_retries=0)
def sdk():
    t0=time.time()
    try: c.chat.completions.create(model="x",messages=body["messages"],max_tokens=150,extra_body={"ignore_eos":True}); print("SDK ok")
    except Exception as e: print("SDK", type(e).__name__, getattr(e,"status_code",None), getattr(e,"body",None), getattr(e,"code",None))
ts=[threading.Thread(target=sdk) for i in range(3)]
for t in ts: t.start(); time.sleep(0.1)
for t in ts: t.join()
