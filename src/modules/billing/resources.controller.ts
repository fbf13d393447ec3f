import { Body, Controller, Get, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Access } from '../../common/auth/principal';
import { NewRateDto, ResourceView } from './dto/billing.dto';
import { BillingService } from './billing.service';

@ApiTags('billing')
@ApiBearerAuth()
@Controller('api/v1/resources')
@Access('user')
export class ResourcesController {
  constructor(private readonly billing: BillingService) {}

  /** The current rate of every resource. */
  @Get()
  list(): Promise<{ items: ResourceView[] }> {
    return this.billing.currentResources();
  }
}

@ApiTags('admin')
@ApiBearerAuth()
@Controller('admin/v1/resources')
@Access('admin')
export class AdminResourcesController {
  constructor(private readonly billing: BillingService) {}

  /** A new version of a rate (or a new resource, with its unit); usage already pinned keeps its old rate. */
  @Post()
  add(@Body() body: NewRateDto): Promise<ResourceView> {
    return this.billing.addRateVersion(body);
  }
}
