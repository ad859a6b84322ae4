#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <string.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(){
  int fd=open("/work/flush.tmp",O_RDWR|O_CREAT,0644);
  char *z=calloc(1,8<<20); pwrite(fd,z,8<<20,0); fdatasync(fd);
  int sizes[]={1024,4096,8192,12288,16384,32768}; int ns=6; int iters=400;
  double *t[6]; for(int s=0;s<ns;s++) t[s]=malloc(sizeof(double)*iters);
  off_t off=0; char buf[65536]; memset(buf,3,sizeof buf);
  for(int i=0;i<iters;i++) for(int s=0;s<ns;s++){
    if(off+sizes[s]>(8<<20)) off=0;
    pwrite(fd,buf,sizes[s],off); off+=sizes[s];
    double a=now(); fdatasync(fd); t[s][i]=now()-a;
  }
  for(int s=0;s<ns;s++){ qsort(t[s],iters,sizeof(double),cmp); printf("%6d bytes: fdatasync median %.1f us, p90 %.1f\n",sizes[s],t[s][iters/2],t[s][iters*9/10]); }
  unlink("/work/flush.tmp");}
