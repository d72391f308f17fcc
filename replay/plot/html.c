/* html.c: one self-contained HTML page: the figures' SVG inline, their data, and a script for hover and zoom. */
#include <inttypes.h>
#include <stdlib.h>

#include "plot_int.h"

static const char page_style[] =
  "body{font-family:sans-serif;margin:16px;color:#212529;background:#fff}"
  "h1{font-size:18px;margin:0 0 8px}.hint{font-size:12px;color:#868e96;margin:0 0 12px}"
  ".figure{margin-bottom:18px}.figure svg{display:block}"
  "#tip{position:fixed;pointer-events:none;background:#212529;color:#fff;font-size:12px;padding:6px 8px;"
  "border-radius:4px;white-space:pre;display:none;max-width:720px;overflow:hidden;z-index:2}"
  "rect.block:hover{stroke:#000;stroke-width:1}";

/* The page's script: hover details (the curves' values under the pointer, a block's own details)
 * and zoom on the time axis (wheel to zoom, drag to pan, double-click to reset). */
static const char page_script[] =
  "(function(){\n"
  "'use strict';\n"
  "var tip=document.getElementById('tip');\n"
  "function bytes(b){var u=['B','KiB','MiB','GiB','TiB'],k=0;while(Math.abs(b)>=1024&&k<4){b/=1024;k++;}"
  "return k?b.toFixed(2)+' '+u[k]:b+' B';}\n"
  "function nice(span,n){if(span<=0)return 1;var raw=span/n,p=Math.pow(10,Math.floor(Math.log10(raw))),m=raw/p;"
  "return (m<=1?1:m<=2?2:m<=2.5?2.5:m<=5?5:10)*p;}\n"
  "function xlabel(v,ts,step){if(!ts)return Math.round(v).toString();var u='s',d=1e9;"
  "if(step<1e3){u='ns';d=1;}else if(step<1e6){u='\\u00b5s';d=1e3;}else if(step<1e9){u='ms';d=1e6;}"
  "var st=step/d,dec=st>=1?0:st>=0.1?1:st>=0.01?2:3;return (v/d).toFixed(dec)+' '+u;}\n"
  "function show(e,text){tip.textContent=text;tip.style.display='block';"
  "tip.style.left=Math.min(e.clientX+14,window.innerWidth-tip.offsetWidth-8)+'px';"
  "tip.style.top=(e.clientY+14)+'px';}\n"
  "function hide(){tip.style.display='none';}\n"
  "document.querySelectorAll('rect.block,rect.segment,g.oom-mark').forEach(function(el){"
  "var t=el.querySelector('title');if(!t)return;el.setAttribute('data-tip',t.textContent);t.remove();"
  "var fr=el.dataset.s&&MEMPLAY_DATA.frames[el.dataset.s];if(fr)el.setAttribute('data-tip',t.textContent+'\\n'+fr);"
  "el.addEventListener('mousemove',function(e){show(e,el.getAttribute('data-tip'));});"
  "el.addEventListener('mouseleave',hide);});\n"
  "var NS='http://www.w3.org/2000/svg';\n"
  "document.querySelectorAll('g.chart').forEach(function(g){\n"
  "var fig=+g.id.split('-')[1],data=MEMPLAY_DATA.figures[fig];if(!data)return;\n"
  "var X0=+g.dataset.x0,X1=+g.dataset.x1,L=+g.dataset.left,W=+g.dataset.width,T=+g.dataset.top,H=+g.dataset.height,"
  "ts=g.dataset.ts==='1',d0=X0,d1=X1;\n"
  "var svg=g.ownerSVGElement,zoom=g.querySelector('g.zoom'),axis=document.getElementById('xaxis-'+fig);\n"
  "var guide=document.createElementNS(NS,'line');guide.setAttribute('stroke','#868e96');"
  "guide.setAttribute('y1',T);guide.setAttribute('y2',T+H);guide.style.display='none';g.appendChild(guide);\n"
  "function px(x){return L+(x-d0)/(d1-d0)*W;}\n"
  "function redraw(){var k=(X1-X0)/(d1-d0),p0=L+(d0-X0)/(X1-X0)*W;"
  "zoom.setAttribute('transform','translate('+(L-k*p0)+',0) scale('+k+',1)');\n"
  "g.querySelectorAll('.zx').forEach(function(el){var x=+el.dataset.x,o=L+(x-X0)/(X1-X0)*W;"
  "el.setAttribute('transform','translate('+(px(x)-o)+',0)');"
  "el.style.display=(x<d0||x>d1)?'none':'';});\n"
  "while(axis.firstChild)axis.removeChild(axis.firstChild);var st=nice(d1-d0,8);\n"
  "for(var v=Math.ceil(d0/st)*st;v<=d1+st*1e-9;v+=st){var x=px(v),ln=document.createElementNS(NS,'line');"
  "ln.setAttribute('x1',x);ln.setAttribute('x2',x);ln.setAttribute('y1',T+H);ln.setAttribute('y2',T+H+4);"
  "ln.setAttribute('stroke','#adb5bd');axis.appendChild(ln);var tx=document.createElementNS(NS,'text');"
  "tx.setAttribute('class','x-tick');tx.setAttribute('x',x);tx.setAttribute('y',T+H+17);"
  "tx.setAttribute('text-anchor','middle');tx.textContent=xlabel(v,ts,st);axis.appendChild(tx);}}\n"
  "function dataX(e){var r=svg.getBoundingClientRect(),sx=(e.clientX-r.left)*svg.viewBox.baseVal.width/r.width;"
  "return {px:sx,x:d0+(sx-L)/W*(d1-d0)};}\n"
  "function near(a,x){var lo=0,hi=a.length-1;if(hi<0)return -1;while(lo<hi){var m=(lo+hi)>>1;if(a[m]<x)lo=m+1;else hi=m;}"
  "if(lo>0&&Math.abs(a[lo-1]-x)<Math.abs(a[lo]-x))lo--;return lo;}\n"
  "svg.addEventListener('wheel',function(e){var p=dataX(e);if(p.px<L||p.px>L+W)return;e.preventDefault();"
  "var f=e.deltaY<0?0.8:1.25,n0=p.x-(p.x-d0)*f,n1=p.x+(d1-p.x)*f;if(n1-n0<1e-9*(X1-X0)+1e-9)return;"
  "d0=Math.max(X0,n0);d1=Math.min(X1,n1);redraw();},{passive:false});\n"
  "var drag=null;svg.addEventListener('mousedown',function(e){var p=dataX(e);if(p.px>=L&&p.px<=L+W)"
  "drag={x:e.clientX,d0:d0,d1:d1};});\n"
  "window.addEventListener('mouseup',function(){drag=null;});\n"
  "svg.addEventListener('dblclick',function(){d0=X0;d1=X1;redraw();});\n"
  "svg.addEventListener('mousemove',function(e){var p=dataX(e);\n"
  "if(drag){var r=svg.getBoundingClientRect(),dx=(e.clientX-drag.x)*svg.viewBox.baseVal.width/r.width/W*(drag.d1-drag.d0);"
  "var a=drag.d0-dx,b=drag.d1-dx;if(a<X0){b+=X0-a;a=X0;}if(b>X1){a-=b-X1;b=X1;}d0=a;d1=b;redraw();return;}\n"
  "if(e.target.closest&&e.target.closest('rect.block,rect.segment,g.oom-mark'))return;\n"
  "if(p.px<L||p.px>L+W||e.clientY<0){guide.style.display='none';hide();return;}\n"
  "var lines=[xlabel(p.x,ts,nice(d1-d0,8)/100)];data.series.forEach(function(s){var i=near(s.x,p.x);if(i<0)return;"
  "lines.push(s.label+': allocated '+bytes(s.a[i])+', reserved '+bytes(s.r[i]));});\n"
  "guide.setAttribute('x1',p.px);guide.setAttribute('x2',p.px);guide.style.display='';show(e,lines.join('\\n'));});\n"
  "svg.addEventListener('mouseleave',function(){guide.style.display='none';hide();});\n"
  "redraw();});\n"
  "})();\n";

/* The hover data of a figure's series: per bucket, the x and the highs of allocated and reserved. */
static void series_json(FILE *f, const plot_series *s, int has_ts) {
  fprintf(f, "{\"label\":\"");
  for (const char *c = s->label; *c; c++) {
    if (*c == '"' || *c == '\\') fputc('\\', f);
    if (*c == '<') fputs("\\u003c", f);
    else if ((unsigned char)*c >= 0x20) fputc(*c, f);
  }
  fprintf(f, "\",\"x\":[");
  for (size_t i = 0; i < s->n; i++) {
    const plot_point *p = &s->buckets[i].hi;
    fprintf(f, "%s%" PRId64, i ? "," : "", has_ts ? sim_ns_between(s->first_ts, p->ts) : p->seq);
  }
  fprintf(f, "],\"a\":[");
  for (size_t i = 0; i < s->n; i++) fprintf(f, "%s%" PRId64, i ? "," : "", s->buckets[i].hi.allocated);
  fprintf(f, "],\"r\":[");
  for (size_t i = 0; i < s->n; i++) fprintf(f, "%s%" PRId64, i ? "," : "", s->buckets[i].rhi);
  fprintf(f, "]}");
}

static void json_text(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c == '<') fputs("\\u003c", f);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The call sites of the maps' blocks, each once: stack id -> the frames a user is shown. */
static void write_frames(FILE *f, const plot_page *p) {
  if (!p->frames) return;
  size_t n = 0, cap = 0;
  int64_t *ids = NULL;
  for (size_t i = 0; i < p->nfigures; i++)
    for (size_t k = 0; k < p->figures[i].nmaps; k++) {
      const replay_moment *m = p->figures[i].maps[k].moment;
      for (size_t b = 0; b < m->nblocks; b++) {
        if (!m->blocks[b].known || !m->blocks[b].stack) continue;
        if (n == cap) {
          cap = cap ? 2 * cap : 256;
          int64_t *t = realloc(ids, cap * sizeof *ids);
          if (!t) break;
          ids = t;
        }
        ids[n++] = m->blocks[b].stack;
      }
    }
  if (n) qsort(ids, n, sizeof *ids, cmp_i64);
  int first = 1;
  for (size_t i = 0; i < n; i++) {
    if (i && ids[i] == ids[i - 1]) continue;
    char *fr = p->frames(p->frames_arg, ids[i]);
    if (!fr) continue;
    fprintf(f, "%s\"%" PRId64 "\":", first ? "" : ",", ids[i]);
    json_text(f, fr);
    free(fr);
    first = 0;
  }
  free(ids);
}

int plot_write_html(const plot_page *p, FILE *f) {
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
  plot_xml_text(f, p->title ? p->title : "memplay");
  fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", page_style);
  plot_xml_text(f, p->title ? p->title : "memplay");
  fprintf(f, "</h1>\n<p class=\"hint\">Hover for details; on a chart, scroll to zoom the time axis, drag to pan, "
             "double-click to reset.</p>\n");
  if (p->html_head) fputs(p->html_head, f);
  for (size_t i = 0; i < p->nfigures; i++) {
    double h = plot_figure_height(&p->figures[i]);
    fprintf(f, "<div class=\"figure\">\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
               "viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\">\n",
            PLOT_WIDTH, h, PLOT_WIDTH, h);
    plot_figure_svg(f, &p->figures[i], (int)i, 0);
    fprintf(f, "</svg>\n</div>\n");
  }
  fprintf(f, "<div id=\"tip\"></div>\n<script>\nvar MEMPLAY_DATA={\"figures\":[");
  for (size_t i = 0; i < p->nfigures; i++) {
    const plot_figure *fig = &p->figures[i];
    int has_ts = 0;
    for (size_t k = 0; k < fig->nseries; k++) has_ts |= fig->series[k]->has_ts;
    fprintf(f, "%s{\"series\":[", i ? "," : "");
    for (size_t k = 0; k < fig->nseries; k++) {
      if (k) fputc(',', f);
      series_json(f, fig->series[k], has_ts);
    }
    fprintf(f, "]}");
  }
  fprintf(f, "],\"frames\":{");
  write_frames(f, p);
  fprintf(f, "}};\n%s</script>\n</body>\n</html>\n", page_script);
  return ferror(f) ? -1 : 0;
}
